package file

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
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

// TestDecodeOneTask: a state for one task (state.For a task id) decodes
// the tasks line, and that task, as encoding/json does, and holds no
// other task: the others are only checked for being well-formed JSON.
// For every variant of Full's tasks.json, keys that are its id escaped,
// twice, in capitals, or deeper in another task, and a line with its
// tasks more than once (encoding/json adds them up).
func TestDecodeOneTask(t *testing.T) {
	data, err := encodeTasks(statetest.Full())
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	variants := statetest.Variants(doc)
	variants["the key escaped"] = strings.Replace(doc, `"t1":{`, `"\u00741":{`, 1)
	variants["the key twice"] = strings.Replace(doc, `"tasks":{`, `"tasks":{"t1":{"id":"t1","title":"first"},`, 1)
	variants["the key deeper"] = strings.Replace(doc, `"tasks":{`, `"tasks":{"t0":{"id":"t0","x":{"t1":{"id":"t1"}},"y":[{"t2":1}]},`, 1)
	variants["the key in capitals"] = strings.Replace(doc, `"t1":{`, `"T1":{`, 1)
	variants["another task damaged"] = strings.Replace(doc, `"t2":{"id":"t2"`, `"t2":{"id":"t2",`, 1)
	variants["a task not an object"] = strings.Replace(doc, `"tasks":{`, `"tasks":{"t0":[1,{"a":2}],`, 1)
	variants["the task null"] = strings.Replace(doc, `"tasks":{`, `"tasks":{"t2":{"id":"t2"},"t1":null,"t9":null,`, 1)
	variants["tasks twice"] = strings.Replace(doc, `"tasks":{`, `"tasks":{"t1":{"id":"t1","title":"first"},"t9":{"id":"t9"}},"tasks":{`, 1)
	variants["tasks in capitals first"] = strings.Replace(doc, `"tasks":{`, `"TASKS":{"t9":{"id":"t9"}},"tasks":{`, 1)
	variants["tasks in capitals after"] = strings.Replace(doc, `"files":`, `"Tasks":{"t2":{"id":"t2","title":"later"}},"files":`, 1)
	variants["tasks null after"] = strings.Replace(doc, `"files":`, `"tasks":null,"files":`, 1)
	variants["tasks a string"] = strings.Replace(doc, `"files":`, `"tasks":"t1","files":`, 1)
	variants["tasks not an object"] = strings.Replace(doc, `"tasks":{`, `"tasks":[],"x":{`, 1)
	for name, text := range variants {
		for _, id := range []string{"t1", "t2", "t9"} {
			got, want := state.For(id), state.For(id)
			gotErr, wantErr := decodeTasks([]byte(text), got), decodeOneStdlib([]byte(text), want, id)
			switch {
			case (gotErr != nil) != (wantErr != nil):
				t.Errorf("%s, task %s: decodeTasks says %v, encoding/json %v", name, id, gotErr, wantErr)
			case gotErr == nil && !reflect.DeepEqual(got, want):
				t.Errorf("%s, task %s: decodeTasks reads\n%+v\nencoding/json\n%+v", name, id, got, want)
			}
		}
	}
}

// decodeOneStdlib is what TestDecodeOneTask expects of decodeTasks for
// a state for task id: encoding/json's decode of the line without its
// tasks, and of task id's value.
func decodeOneStdlib(data []byte, st *state.State, id string) error {
	line := struct {
		*state.State
		Tasks map[string]json.RawMessage `json:"tasks"`
	}{State: st}
	if err := json.Unmarshal(data, &line); err != nil {
		return err
	}
	st.Tasks = map[string]*state.Task{}
	if v, ok := line.Tasks[id]; ok && string(v) != "null" {
		t := new(state.Task)
		if err := json.Unmarshal(v, t); err != nil {
			return err
		}
		st.Tasks[id] = t
	}
	return nil
}
