// Package supervise is crew's supervision of workers: the processes
// that do a run's tasks (docs/concepts.md, Supervised workers and
// Liveness). It starts a task's worker and waits for it (Spawn), tells
// whether a recorded worker's process is gone and records the exits that
// no one saw (Reap; ReapRoot over every run, as crew serve does each
// second), keeps heartbeats (Heartbeat, Alive) and worker logs
// (WorkerLog, OpenWorkerLog), says what each task is doing (Liveness,
// TasksAlive), waits for a run while watching its workers (WaitRun),
// and stops workers: a crew spawn stops its worker when the log asks it
// to (state.Worker.Stop; stop.go), and AwaitStopped waits for a run's
// workers to be gone, stopping itself those whose crew spawn died.
//
// Imports go one way: supervise imports run, never the reverse. What a
// worker's start and exit do to a task is an operation of the run
// (run.Run.WorkerStarted, run.Run.WorkerExited, run.Spawnable), written
// with the other operations as a function of the run's state; this
// package holds what those operations cannot know from the log: the
// processes (pids, start times, process groups, signals; internal/proc)
// and the files of a run's workers on this machine (run.Run.WorkersDir:
// logs, heartbeats). Liveness is split the same way: its words and its
// rule (run.LivenessOf, run.LastSignOfLife, run.DefaultQuietAfter) are
// run's and read nothing; Liveness here gathers the two facts the rule
// takes, whether a worker's process is gone and the time of its last
// heartbeat, and applies it. So a front end (cmd/crew, app) that shows
// or waits on tasks calls this package, and run's operations never look
// at a worker's process.
//
// Supervise reaches a run only through run's exported methods: TaskState
// and Watch to read, WorkerStarted, WorkerExited and NudgeQuiet to
// write, WorkersDir and Root().Perm for the place and modes of its
// files; never through the store (no type assertion on one).
package supervise
