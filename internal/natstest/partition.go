package natstest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// A partition is the routes of a cluster made by NewPartitionableCluster:
// node i reaches node j only through a proxy (i→j) of the test on
// loopback, so the test can cut a node off from the others, as a network
// partition would, and join it again. Nothing leaves the machine.
type partition struct {
	mu      sync.Mutex
	cut     map[int]bool
	proxies []*routeProxy
}

// routeProxy forwards the route connections node from opens to node to.
type routeProxy struct {
	p        *partition
	from, to int
	ln       net.Listener
	target   string
	conns    map[net.Conn]bool
}

// NewPartitionableCluster is NewCluster whose nodes reach each other only
// through proxies of the test (the nodes do not advertise their own route
// addresses, so no route bypasses them): Cut cuts a node off from the
// others and Heal joins it again. Clients reach every node as before.
func NewPartitionableCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return newCluster(t, n, true)
}

// proxyRoutes starts a proxy for each ordered pair of the n nodes, which
// listen for routes on routePorts, and returns each node's routes.
func (p *partition) proxyRoutes(t testing.TB, routePorts []int) [][]*url.URL {
	n := len(routePorts)
	routes := make([][]*url.URL, n)
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			rp := &routeProxy{p: p, from: i, to: j, ln: ln, target: fmt.Sprintf("127.0.0.1:%d", routePorts[j]), conns: map[net.Conn]bool{}}
			p.proxies = append(p.proxies, rp)
			go rp.serve()
			routes[i] = append(routes[i], &url.URL{Scheme: "nats", Host: ln.Addr().String()})
		}
	}
	t.Cleanup(p.close)
	return routes
}

// serve accepts route connections and forwards them, unless either end is
// cut off.
func (rp *routeProxy) serve() {
	for {
		in, err := rp.ln.Accept()
		if err != nil {
			return // closed
		}
		out, err := net.Dial("tcp", rp.target)
		if err != nil {
			in.Close()
			continue
		}
		rp.p.mu.Lock()
		if rp.p.cut[rp.from] || rp.p.cut[rp.to] {
			rp.p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		rp.conns[in], rp.conns[out] = true, true
		rp.p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			rp.p.mu.Lock()
			delete(rp.conns, dst)
			delete(rp.conns, src)
			rp.p.mu.Unlock()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// setCut cuts node i off (closing its route connections) or joins it again.
func (p *partition) setCut(i int, cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut[i] = cut
	if !cut {
		return
	}
	for _, rp := range p.proxies {
		if rp.from == i || rp.to == i {
			for c := range rp.conns {
				c.Close()
			}
		}
	}
}

func (p *partition) close() {
	for _, rp := range p.proxies {
		rp.ln.Close()
	}
	p.closeAll()
}

// closeAll closes every forwarded connection.
func (p *partition) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rp := range p.proxies {
		for c := range rp.conns {
			c.Close()
		}
	}
}

// Cut cuts node i off from the other nodes: its route connections are
// closed and new ones refused, while its clients stay connected to it. It
// needs a cluster made by NewPartitionableCluster.
func (c *Cluster) Cut(i int) {
	c.t.Helper()
	if c.part == nil {
		c.t.Fatal("Cut needs a cluster made by NewPartitionableCluster")
	}
	c.part.setCut(i, true)
}

// Heal joins node i to the others again (after Cut) and waits until the
// cluster is ready with every live node.
func (c *Cluster) Heal(i int) {
	c.t.Helper()
	if c.part == nil {
		c.t.Fatal("Heal needs a cluster made by NewPartitionableCluster")
	}
	c.part.setCut(i, false)
	live := 0
	for _, s := range c.Nodes {
		if s != nil {
			live++
		}
	}
	c.waitReady(live)
}
