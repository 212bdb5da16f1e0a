// Package task is the task state machine of docs/state-machine.md: the states a task can
// be in, the operations that move it between them, and the error that says
// why an operation is refused. It is pure: no I/O, no clock, no locks. The
// run package records transitions in the log; this package only decides
// whether they are allowed.
//
// The transition table (built on github.com/looplab/fsm):
//
//	op           from                       to         who
//	start        pending                    running    worker
//	ask          running                    waiting    worker
//	respond      waiting                    running    leader
//	ask-timeout  waiting                    running    the asking worker, when its wait times out
//	complete     running                    completed  worker or leader
//	fail         pending, running, waiting  failed     worker or leader
//	cancel       pending, running, waiting  cancelled  leader
//	retry        failed, cancelled          pending    leader
//
// completed, failed and cancelled are terminal: only retry leaves failed or
// cancelled, and nothing leaves completed. Every other (state, op) pair is
// refused with a *TransitionError, which wraps crew.ErrConflict (exit 3) and
// names the task, its state and what would work instead.
package task
