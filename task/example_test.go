package task_test

import (
	"errors"
	"fmt"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/task"
)

func ExampleNext() {
	next, err := task.Next("t1", task.Waiting, task.Respond)
	fmt.Println(next, err)

	_, err = task.Next("t1", task.Running, task.Respond)
	fmt.Println(err)
	fmt.Println(errors.Is(err, crew.ErrConflict))
	// Output:
	// running <nil>
	// task t1 is running, not waiting; use follow-up or steer
	// true
}

func ExampleAllowed() {
	fmt.Println(task.Allowed(task.Running))
	// Output:
	// [ask complete fail cancel restart]
}
