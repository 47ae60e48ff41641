package main

import (
	"encoding/json"
	"os"
	"sort"
	"time"
)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// spread returns the median, minimum and maximum of v.
func spread(v []float64) [3]float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return [3]float64{med, s[0], s[len(s)-1]}
}

// writeJSON writes v as indented JSON to path; with no path, nothing.
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
