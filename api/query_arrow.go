package api

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// writeDensityArrow writes a density as an Arrow IPC stream: one record
// batch with one uint32 column `count`, a row per cell in the JSON order
// (x fastest), and the shape, box, level and total in the schema's
// zvf:density metadata, so a table reshapes without another request.
func writeDensityArrow(w *bufio.Writer, h *densityHeader, counts []uint32, total uint64) error {
	md, err := json.Marshal(struct {
		*densityHeader
		Count uint64 `json:"count"`
	}{h, total})
	if err != nil {
		return err
	}
	meta := arrow.NewMetadata([]string{"zvf:density"}, []string{string(md)})
	schema := arrow.NewSchema([]arrow.Field{{Name: "count", Type: arrow.PrimitiveTypes.Uint32}}, &meta)
	b := array.NewUint32Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(counts, nil)
	col := b.NewUint32Array()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(counts)))
	defer rec.Release()
	iw := ipc.NewWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))
	if err := iw.Write(rec); err != nil {
		return fmt.Errorf("arrow density: %w", err)
	}
	if err := iw.Close(); err != nil {
		return fmt.Errorf("arrow density: %w", err)
	}
	return nil
}
