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
	// The table is the one headed | code | meaning ..., up to the first
	// line that is not a row: other tables may start rows with numbers.
	table := regexp.MustCompile(`(?m)^\| code \| meaning \|.*\n(?:\|.*\n)+`)
	row := regexp.MustCompile(`(?m)^\| (\d+) \| `)
	for _, doc := range []string{"../../README.md", "../../docs/cli.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, m := range row.FindAllStringSubmatch(table.FindString(string(data)), -1) {
			n, _ := strconv.Atoi(m[1])
			got = append(got, n)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s lists exit codes %v; crew exits with %v", doc, got, want)
		}
	}
}
