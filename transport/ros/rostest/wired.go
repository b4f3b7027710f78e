package rostest

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// Unwired returns, as "publisher → subscriber topic", every topic that
// one of the nodes a and b publishes and the other subscribes to, by the
// master's registrations, but over which the publisher has no live
// connection to the subscriber yet (asking the publisher itself, see
// Connected). A message published on such a topic is lost. It returns
// "master: <error>" when the master does not answer.
func (m *Master) Unwired(a, b string) []string {
	st, err := m.Client("/rostest").GetSystemState()
	if err != nil {
		return []string{"master: " + err.Error()}
	}
	subs := map[string][]string{}
	for _, e := range st.SubscribedTopics {
		subs[e.Name] = e.Nodes
	}
	var out []string
	for _, e := range st.PublishedTopics {
		for _, pair := range [][2]string{{a, b}, {b, a}} {
			pub, sub := pair[0], pair[1]
			if !slices.Contains(e.Nodes, pub) || !slices.Contains(subs[e.Name], sub) {
				continue
			}
			if !m.Connected(pub, e.Name, sub) {
				out = append(out, pub+" → "+sub+" "+e.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// WaitWired waits at most max until nothing is Unwired between the nodes
// a and b (full graph names, "/robot_bridge"), failing the test with what
// is still unconnected. A node's registration with the master only says
// that a connection will be set up; a test that needs every first message
// delivered waits for this.
func (m *Master) WaitWired(t testing.TB, a, b string, max time.Duration) {
	t.Helper()
	deadline := time.Now().Add(max)
	for {
		left := m.Unwired(a, b)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after %s: ROS connections between %s and %s never came up: %s", ErrTimeout, max, a, b, strings.Join(left, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
