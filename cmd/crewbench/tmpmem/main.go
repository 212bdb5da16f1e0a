package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

func heap(what string) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fmt.Printf("%-20s live %.1f MB\n", what, float64(m.HeapAlloc)/1e6)
}

func main() {
	root, err := run.Find(os.Args[1], crew.PrivatePerm)
	if err != nil {
		panic(err)
	}
	r, err := root.Open("rss")
	if err != nil {
		panic(err)
	}
	heap("start")
	st, _ := r.State()
	heap("full state")
	fmt.Println(len(st.Open))
	st = nil
	heap("dropped")
	n := 0
	err = r.EachInbox(context.Background(), "m1", run.InboxOptions{Peek: os.Getenv("PEEK") != ""}, func(m *events.Message) error {
		n++
		if n == 50000 {
			heap("mid-stream")
			f, _ := os.Create("/tmp/cb/heap.prof")
			pprof.WriteHeapProfile(f)
			f.Close()
		}
		return nil
	})
	fmt.Println(n, err)
}
