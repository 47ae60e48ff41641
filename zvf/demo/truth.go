package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// truth is the JSON layout of WriteTruth: positions as rows of float32
// (printed exactly), index arrays as given to the writer.
type truth struct {
	Cells struct {
		Positions [][]float32 `json:"positions"`
		ObjectIDs []int64     `json:"object_ids"`
	} `json:"cells"`
	Axons struct {
		Positions [][]float32 `json:"positions"`
		Offsets   []int       `json:"offsets"`
	} `json:"axons"`
	Skeletons struct {
		Positions [][]float32 `json:"positions"`
		Edges     [][2]int64  `json:"edges"`
		ObjectIDs []int64     `json:"object_ids"`
	} `json:"skeletons"`
	Meshes struct {
		Positions [][]float32 `json:"positions"`
		Faces     [][]int64   `json:"faces"`
		ObjectIDs []int64     `json:"object_ids"`
	} `json:"meshes"`
}

func rows3(p []float32) [][]float32 {
	out := make([][]float32, len(p)/3)
	for i := range out {
		out[i] = p[3*i : 3*i+3]
	}
	return out
}

// WriteTruth writes the scene's geometry as JSON (see .ci/check_reference.py,
// which compares the reference implementation's readers against it).
func (s *Scene) WriteTruth(w io.Writer) error {
	var t truth
	t.Cells.Positions, t.Cells.ObjectIDs = rows3(s.Cells.Positions), s.Cells.ObjectIDs
	t.Axons.Positions, t.Axons.Offsets = rows3(s.Axons.Positions), s.Axons.Offsets
	t.Skeletons.Positions, t.Skeletons.ObjectIDs = rows3(s.Skeletons.Positions), s.Skeletons.ObjectIDs
	t.Skeletons.Edges = make([][2]int64, len(s.Skeletons.Edges)/2)
	for i := range t.Skeletons.Edges {
		t.Skeletons.Edges[i] = [2]int64{s.Skeletons.Edges[2*i], s.Skeletons.Edges[2*i+1]}
	}
	t.Meshes.Positions, t.Meshes.ObjectIDs = rows3(s.Meshes.Positions), s.Meshes.ObjectIDs
	fw := s.Meshes.FaceWidth
	t.Meshes.Faces = make([][]int64, len(s.Meshes.Faces)/fw)
	for i := range t.Meshes.Faces {
		t.Meshes.Faces[i] = s.Meshes.Faces[fw*i : fw*i+fw]
	}
	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(&t); err != nil {
		return fmt.Errorf("demo: write truth: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("demo: write truth: %w", err)
	}
	return nil
}
