//go:build !race

package zvf_test

const raceEnabled = false
