package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// cookiePrefix begins the name of the cookie that holds the token after
// the first request: crew_token_PORT. Browsers keep cookies by host, not
// by port, so two servers on one machine need cookies of their own.
const cookiePrefix = "crew_token_"

// contentPolicy is every response's Content-Security-Policy: scripts,
// styles and fetches from the server itself only, no inline script or
// style, no frames, forms posted to the server only.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// guard checks every request before a handler sees it: the Host header,
// the token (URL, then cookie) and, for a request that changes state,
// the Origin and the CSRF token.
type guard struct {
	token  string          // the secret in the URL crew serve prints, hex
	cookie string          // the cookie's name
	csrf   string          // the CSRF token forms carry: HMAC-SHA256(token, "csrf"), hex
	hosts  map[string]bool // Host header values accepted, lower case
}

func newGuard(token string, hosts []string) *guard {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("csrf"))
	g := &guard{token: token, csrf: hex.EncodeToString(mac.Sum(nil)), hosts: map[string]bool{}, cookie: cookiePrefix}
	if _, port, err := net.SplitHostPort(hosts[0]); err == nil {
		g.cookie += port
	}
	for _, h := range hosts {
		g.hosts[strings.ToLower(h)] = true
	}
	return g
}

// NewToken returns a random token: 32 bytes from crypto/rand, as 64 hex
// digits.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand, Go 1.24)
	return hex.EncodeToString(b)
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// wrap returns next behind the checks. A request with the token in its
// URL gets the cookie and is sent to the same URL without the token, so
// that the token leaves the address bar and the history.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !g.hosts[strings.ToLower(r.Host)] {
			refuse(w, http.StatusMisdirectedRequest, "crew serve: host "+strconv.Quote(r.Host)+" is not the address served; open the URL crew serve printed")
			return
		}
		if t := r.URL.Query().Get("token"); t != "" {
			g.login(w, r, t)
			return
		}
		c, err := r.Cookie(g.cookie)
		if err != nil || !same(c.Value, g.token) {
			refuse(w, http.StatusUnauthorized, "crew serve: no valid token; open the URL crew serve printed (it carries the token)")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if msg := g.checkChange(r); msg != "" {
				refuse(w, http.StatusForbidden, "crew serve: "+msg)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// login sets the cookie for a valid token t and redirects to the URL
// without it.
func (g *guard) login(w http.ResponseWriter, r *http.Request, t string) {
	if !same(t, g.token) {
		refuse(w, http.StatusUnauthorized, "crew serve: wrong token; open the URL crew serve printed")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: g.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	u := *r.URL
	q := u.Query()
	q.Del("token")
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}

// checkChange checks a state-changing request: its Origin must be the
// address served and its form must carry the CSRF token. It returns why
// it is refused, or "".
func (g *guard) checkChange(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "a request that changes state must carry an Origin header"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || !g.hosts[strings.ToLower(u.Host)] || u.Path != "" {
		return "origin " + strconv.Quote(origin) + " is not the address served"
	}
	if !same(r.PostFormValue("csrf"), g.csrf) {
		return "missing or wrong CSRF token; reload the page and try again"
	}
	return ""
}

// refuse answers a request crew serve refuses before reading its body,
// and closes the connection: without Connection: close net/http would
// first read what is left of the body, and a client that never finishes
// it (no token needed) would hold the connection forever.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// Hosts returns the Host header values that name addr, the address a
// server listens on ("127.0.0.1:7777"): addr itself; with localhost for
// a loopback address; for an unspecified one (0.0.0.0, ::), every
// address of the machine's interfaces, its host name and localhost.
func Hosts(addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	out := []string{addr}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
	case ip.IsLoopback():
		out = append(out, net.JoinHostPort("localhost", port))
	case ip.IsUnspecified():
		out = append(out, net.JoinHostPort("localhost", port))
		if name, err := os.Hostname(); err == nil {
			out = append(out, net.JoinHostPort(name, port))
		}
		as, err := net.InterfaceAddrs()
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				out = append(out, net.JoinHostPort(n.IP.String(), port))
			}
		}
	}
	return out, nil
}

// Loopback reports whether addr ("host:port") names only this machine: a
// loopback IP address or localhost.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
