package file

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/state/statetest"
)

// TestTasksJSONAsStdlib: the state's tasks are written as encoding/json
// writes them, byte for byte, and read as it reads them, or refused as it
// refuses them (segmentio's encoder and decoder, encodeTasks and
// decodeTasks): a state with every field set, and its variants
// (statetest.Variants).
func TestTasksJSONAsStdlib(t *testing.T) {
	st := statetest.Full()
	data, err := encodeTasks(st)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("encodeTasks writes\n%s\nencoding/json\n%s", data, want)
	}
	for name, text := range statetest.Variants(string(data)) {
		statetest.SameAsStdlib(t, name, text, decodeTasks)
	}
	var back state.State
	if err := decodeTasks(data, &back); err != nil || len(back.Tasks) != len(st.Tasks) || back.Tasks["t1"].Workers[0].Tmux != "s:1" {
		t.Fatalf("decodeTasks(encodeTasks(state)) = %+v, %v", back, err)
	}
}
