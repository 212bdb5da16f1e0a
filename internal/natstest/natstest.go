package natstest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server starts one JetStream server on a random loopback port and
// returns it; its client URL is s.ClientURL().
func Server(t testing.TB) *server.Server {
	t.Helper()
	o := opts(t, "crew-test", t.TempDir())
	s, err := start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	started.Store(s, o)
	return s
}

// started holds the options of each server Server started, for Restart.
var started sync.Map // *server.Server -> *server.Options

// Restart shuts s, a server of Server, down and starts it again with its
// store and on its client port, so that clients reconnect to it; it
// returns the new server, which is shut down when the test ends.
func Restart(t testing.TB, s *server.Server) *server.Server {
	t.Helper()
	v, ok := started.Load(s)
	if !ok {
		t.Fatal("natstest.Restart: not a server of natstest.Server")
	}
	o := *v.(*server.Options)
	o.Port = s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()
	again, err := start(&o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Shutdown)
	started.Store(again, &o)
	return again
}

// Start starts one JetStream server (fsync always) with its store in dir,
// on a random loopback port, for programs that are not tests (make
// bench). Shut it down.
func Start(dir string) (*server.Server, error) {
	return start(opts(nil, "crew-bench", dir))
}

func opts(_ testing.TB, name, dir string) *server.Options {
	return &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
		// An event carries a body of up to 1 MiB (docs/files.md, Body limit) plus its
		// envelope: above the default max_payload of 1 MiB.
		MaxPayload: 8 << 20,
		// Small limits keep a test's servers light on a 2-core machine.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  1 << 30,
	}
}

func start(o *server.Options) (*server.Server, error) {
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("start nats-server %s: %w", o.ServerName, err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats-server %s did not get ready in 20s", o.ServerName)
	}
	return s, nil
}

// Cluster is a JetStream cluster of nodes on loopback.
type Cluster struct {
	t       testing.TB
	Nodes   []*server.Server // nil where a node was killed
	options []*server.Options
	ports   []int      // each node's client port, kept for Restart
	part    *partition // the route proxies of NewPartitionableCluster, else nil
}

// NewCluster starts an n-node JetStream cluster on loopback (random
// ports, one store directory per node under t.TempDir()) and waits until
// it has a meta leader.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return newCluster(t, n, false)
}

func newCluster(t testing.TB, n int, proxied bool) *Cluster {
	t.Helper()
	routePorts := freePorts(t, n)
	c := &Cluster{t: t}
	routes := make([][]*url.URL, n)
	if proxied {
		c.part = &partition{cut: map[int]bool{}}
		routes = c.part.proxyRoutes(t, routePorts)
	} else {
		for i := range n {
			for _, p := range routePorts {
				routes[i] = append(routes[i], &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
			}
		}
	}
	base := t.TempDir()
	for i := range n {
		o := opts(t, fmt.Sprintf("crew-%d", i), filepath.Join(base, fmt.Sprint(i)))
		o.Cluster = server.ClusterOpts{Name: "crew-test", Host: "127.0.0.1", Port: routePorts[i], NoAdvertise: proxied}
		o.Routes = routes[i]
		c.options = append(c.options, o)
	}
	errs := make(chan error, n)
	c.Nodes = make([]*server.Server, n)
	for i, o := range c.options {
		go func() {
			s, err := start(o)
			c.Nodes[i] = s
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range c.Nodes {
		c.ports = append(c.ports, s.Addr().(*net.TCPAddr).Port)
	}
	t.Cleanup(func() {
		for _, s := range c.Nodes {
			if s != nil {
				s.Shutdown()
			}
		}
	})
	c.waitReady(n)
	return c
}

// waitReady waits until the cluster has a meta leader that sees want
// JetStream peers and every live node is current with it: only then can a
// stream with replicas be placed and every request be answered.
func (c *Cluster) waitReady(want int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !c.ready(want) {
		if time.Now().After(deadline) {
			c.t.Fatalf("the JetStream cluster was not ready with %d peers in 30s", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) ready(want int) bool {
	peers := 0
	for _, s := range c.Nodes {
		if s == nil {
			continue
		}
		if !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() {
			peers = len(s.JetStreamClusterPeers())
		}
	}
	return peers >= want
}

// URL is the client URL list of the live nodes, comma-separated, as crew's
// --store takes it.
func (c *Cluster) URL() string {
	var urls []string
	for _, s := range c.Nodes {
		if s != nil {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// StreamLeader returns the index of the node that leads stream (in the
// global account), or -1.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Nodes {
		if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// Kill shuts node i down at once (its store stays on disk). It returns
// once the others have a meta leader again, so requests are answered.
func (c *Cluster) Kill(i int) {
	if s := c.Nodes[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.Nodes[i] = nil
	}
	c.waitReady(0)
}

// Restart starts node i again after Kill, with its store and on its
// former client port (so client URLs taken before still reach it), and
// waits until the cluster is ready with every node.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		return
	}
	o := *c.options[i]
	o.Port = c.ports[i]
	s, err := start(&o)
	if err != nil {
		c.t.Fatal(err)
	}
	c.Nodes[i] = s
	c.waitReady(len(c.Nodes))
}

// WaitStreamLeader waits until some live node leads stream and is current
// with it, and returns its index.
func (c *Cluster) WaitStreamLeader(stream string) int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if i := c.StreamLeader(stream); i >= 0 && c.Nodes[i].JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no node leads stream %s 30s after the failover", stream)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePorts returns n loopback TCP ports that were free a moment ago:
// cluster routes must be known before the servers start.
func freePorts(t testing.TB, n int) []int {
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// StartConfig starts a server from the nats-server configuration file
// conf (for instance one that includes the auth.conf of crew nats auth),
// on a random loopback port, with JetStream (fsync always) and its store
// in dir, as the tests of authorization run it. Shut it down.
func StartConfig(conf, dir string) (*server.Server, error) {
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		return nil, fmt.Errorf("nats-server configuration %s: %w", conf, err)
	}
	base := opts(nil, "crew-auth", dir)
	o.ServerName, o.Host, o.Port = base.ServerName, base.Host, base.Port
	o.JetStream, o.StoreDir, o.SyncAlways = true, dir, true
	o.NoLog, o.NoSigs, o.MaxPayload = true, true, base.MaxPayload
	o.JetStreamMaxMemory, o.JetStreamMaxStore = base.JetStreamMaxMemory, base.JetStreamMaxStore
	return start(o)
}
