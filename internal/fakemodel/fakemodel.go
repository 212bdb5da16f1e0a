// Package fakemodel serves scripted fakes of the model APIs the real
// agents call, for tests that run Claude Code, Codex and Gemini CLI
// against crew: Anthropic Messages (POST /v1/messages, SSE streaming),
// OpenAI Responses (POST /v1/responses, SSE) and Gemini
// (POST /v1beta/models/MODEL:streamGenerateContent?alt=sse). A script is
// a list of turns, each a tool call or a text answer that ends the turn;
// the agent's main requests (those that offer tools) take the script's
// turns in order, its side requests (titles, summaries) get a short text.
// Every request is logged, so a test asserts what the model was shown.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Dialect is the vendor API a Server speaks.
type Dialect int

const (
	Anthropic Dialect = iota // Messages API, SSE
	OpenAI                   // Responses API, SSE
	Gemini                   // streamGenerateContent, SSE
)

// Turn is one model answer: a call of Tool with Input, or (Tool "")
// Text that ends the turn. Pick, when set, chooses the tool and its
// input from the names the request offers (the agent's own names for
// its shell, or for crew's MCP tools); no tool and no Text is "Done.".
type Turn struct {
	// Tool is the tool's name; one a request offers inside a namespace
	// (the Responses API's tools of type namespace: Codex's MCP servers,
	// mcp__SERVER) is named NAMESPACE.TOOL, and called by the namespace
	// and the tool's own name.
	Tool  string
	Input map[string]any
	Text  string
	Pick  func(tools []string) (tool string, input map[string]any)
}

// Request is one logged request.
type Request struct {
	At   time.Time
	Path string
	Body string
	// Main: the request offers tools, and took a turn of the script.
	Main bool
	// Tools are the names of the tools it offers.
	Tools []string
}

// Shows reports whether the model was shown s in this request (s as it
// is, or escaped as a JSON string).
func (r Request) Shows(s string) bool {
	q, _ := json.Marshal(s)
	return strings.Contains(r.Body, s) || strings.Contains(r.Body, strings.Trim(string(q), `"`))
}

// Count is how many times the model was shown s in this request (a
// request carries the whole conversation so far).
func (r Request) Count(s string) int {
	q, _ := json.Marshal(s)
	if n := strings.Count(r.Body, strings.Trim(string(q), `"`)); n > 0 {
		return n
	}
	return strings.Count(r.Body, s)
}

// First is the index of the first of reqs that shows s, -1 if none.
func First(reqs []Request, s string) int {
	for i, r := range reqs {
		if r.Shows(s) {
			return i
		}
	}
	return -1
}

// Server is a fake model API on a free port of 127.0.0.1.
type Server struct {
	URL     string
	dialect Dialect
	mu      sync.Mutex
	changed chan struct{}
	reqs    []Request
	script  []Turn
	calls   int
	prompt  int // promptTokenCount Gemini answers report
}

// Start serves dialect until the test ends.
func Start(t testing.TB, dialect Dialect, script ...Turn) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + l.Addr().String(), dialect: dialect, changed: make(chan struct{}), script: script}
	srv := &http.Server{Handler: s}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// PromptTokens makes every later Gemini answer report n prompt tokens
// (usageMetadata.promptTokenCount, 100 by default): the count Gemini CLI
// compares with its model's window to decide to compress its history.
func (s *Server) PromptTokens(n int) {
	s.mu.Lock()
	s.prompt = n
	s.mu.Unlock()
}

// Add appends turns to the script.
func (s *Server) Add(turns ...Turn) {
	s.mu.Lock()
	s.script = append(s.script, turns...)
	s.mu.Unlock()
}

// Requests returns the requests logged so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Main returns the main requests logged so far.
func (s *Server) Main() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Main {
			out = append(out, r)
		}
	}
	return out
}

// WaitMain waits until n main requests were logged and returns them,
// or fails the test after timeout.
func (s *Server) WaitMain(t testing.TB, n int, timeout time.Duration) []Request {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if m := s.Main(); len(m) >= n {
			return m
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("fakemodel: %d main requests after %v, want %d", len(s.Main()), timeout, n)
		}
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{At: time.Now(), Path: r.URL.Path, Body: string(body), Tools: toolNames(s.dialect, body)}
	generate := r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/messages") || strings.HasSuffix(r.URL.Path, "/responses") || strings.Contains(r.URL.Path, ":streamGenerateContent") || strings.Contains(r.URL.Path, ":generateContent"))
	var turn Turn
	s.mu.Lock()
	if generate && len(req.Tools) > 0 {
		req.Main = true
		if len(s.script) > 0 {
			turn, s.script = s.script[0], s.script[1:]
		} else {
			turn = Turn{Text: "Done."}
		}
	} else {
		turn = Turn{Text: "ok"}
	}
	s.calls++
	id := s.calls
	prompt := s.prompt
	s.reqs = append(s.reqs, req)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":100}`)
		return
	case strings.Contains(r.URL.Path, ":countTokens"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"totalTokens":100}`)
		return
	case !generate:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[],"models":[]}`)
		return
	}
	if turn.Pick != nil {
		if turn.Tool, turn.Input = turn.Pick(req.Tools); turn.Tool == "" && turn.Text == "" {
			turn.Text = "Done."
		}
	}
	if turn.Input == nil {
		turn.Input = map[string]any{}
	}
	if strings.Contains(r.URL.Path, ":generateContent") {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(geminiChunk(turn, prompt))
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	sse := func(event string, data any) {
		b, _ := json.Marshal(data)
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	switch s.dialect {
	case Anthropic:
		anthropic(sse, turn, id)
	case OpenAI:
		openai(sse, turn, id)
	case Gemini:
		sse("", geminiChunk(turn, prompt))
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

type obj = map[string]any

func anthropic(sse func(string, any), t Turn, id int) {
	usage := obj{"input_tokens": 100, "output_tokens": 10}
	sse("message_start", obj{"type": "message_start", "message": obj{"id": fmt.Sprintf("msg_%d", id), "type": "message", "role": "assistant",
		"model": "claude-sonnet-4-5", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	stop := "end_turn"
	if t.Tool != "" {
		stop = "tool_use"
		in, _ := json.Marshal(t.Input)
		sse("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", id), "name": t.Tool, "input": obj{}}})
		sse("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "input_json_delta", "partial_json": string(in)}})
	} else {
		sse("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}})
		sse("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": t.Text}})
	}
	sse("content_block_stop", obj{"type": "content_block_stop", "index": 0})
	sse("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": obj{"output_tokens": 10}})
	sse("message_stop", obj{"type": "message_stop"})
}

func openai(sse func(string, any), t Turn, id int) {
	resp := obj{"id": fmt.Sprintf("resp_%d", id), "object": "response", "status": "in_progress", "output": []any{}}
	sse("response.created", obj{"type": "response.created", "response": resp})
	var item obj
	if t.Tool != "" {
		in, _ := json.Marshal(t.Input)
		item = obj{"type": "function_call", "id": fmt.Sprintf("fc_%d", id), "call_id": fmt.Sprintf("call_%d", id), "name": t.Tool, "arguments": string(in), "status": "completed"}
		if ns, name, ok := strings.Cut(t.Tool, "."); ok {
			item["namespace"], item["name"] = ns, name
		}
	} else {
		item = obj{"type": "message", "id": fmt.Sprintf("msg_%d", id), "role": "assistant", "status": "completed",
			"content": []any{obj{"type": "output_text", "text": t.Text, "annotations": []any{}}}}
	}
	sse("response.output_item.done", obj{"type": "response.output_item.done", "output_index": 0, "item": item})
	resp["status"] = "completed"
	resp["output"] = []any{item}
	resp["usage"] = obj{"input_tokens": 100, "input_tokens_details": obj{"cached_tokens": 0}, "output_tokens": 10, "output_tokens_details": obj{"reasoning_tokens": 0}, "total_tokens": 110}
	sse("response.completed", obj{"type": "response.completed", "response": resp})
}

func geminiChunk(t Turn, prompt int) obj {
	if prompt == 0 {
		prompt = 100
	}
	var part obj
	if t.Tool != "" {
		part = obj{"functionCall": obj{"name": t.Tool, "args": t.Input}}
	} else {
		part = obj{"text": t.Text}
	}
	return obj{"candidates": []any{obj{"content": obj{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": obj{"promptTokenCount": prompt, "candidatesTokenCount": 10, "totalTokenCount": prompt + 10}, "modelVersion": "gemini-2.5-pro"}
}

// toolNames are the names of the tools a request body offers.
func toolNames(d Dialect, body []byte) []string {
	var req struct {
		Tools []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"` // type namespace
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var names []string
	for _, t := range req.Tools {
		if t.Name != "" {
			names = append(names, t.Name)
		}
		if t.Type == "namespace" {
			for _, f := range t.Tools {
				names = append(names, t.Name+"."+f.Name)
			}
		}
		for _, f := range t.FunctionDeclarations {
			names = append(names, f.Name)
		}
	}
	return names
}
