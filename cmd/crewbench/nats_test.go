package main

import "testing"

// measureNATS runs end to end on an embedded server (a smoke test of the
// bench's NATS part; the figures themselves are make bench's).
func TestMeasureNATSRuns(t *testing.T) {
	res, err := measureNATS(t.TempDir(), 50, 10)
	if err != nil {
		t.Fatal(err)
	}
	if res.RawPublishPerS <= 0 || res.SendPerS <= 0 || res.SendRatio <= 0 {
		t.Fatalf("nothing measured: %+v", res)
	}
	t.Logf("%+v", res)
}
