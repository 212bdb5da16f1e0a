package web

import "time"

// SetBodyTimeout sets bodyTimeout to d until restore is called.
func SetBodyTimeout(d time.Duration) (restore func()) {
	old := bodyTimeout
	bodyTimeout = d
	return func() { bodyTimeout = old }
}

// SetAnswerTimeout sets answerTimeout to d until restore is called.
func SetAnswerTimeout(d time.Duration) (restore func()) {
	old := answerTimeout
	answerTimeout = d
	return func() { answerTimeout = old }
}
