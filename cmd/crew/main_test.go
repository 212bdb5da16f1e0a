package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The exit-code tables of README.md and docs/cli.md list exactly the codes
// crew exits with (exitCodes, which crew --help prints): 130 included.
func TestExitCodesDocumented(t *testing.T) {
	var want []int
	for _, c := range exitCodes {
		want = append(want, c.code)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| `)
	for _, doc := range []string{"../../README.md", "../../docs/cli.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, m := range row.FindAllStringSubmatch(string(data), -1) {
			n, _ := strconv.Atoi(m[1])
			got = append(got, n)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s lists exit codes %v; crew exits with %v", doc, got, want)
		}
	}
}
