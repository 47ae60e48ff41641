package zvf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// SourceHeader returns the attributes of headers/<format>/zarr.json: the
// header of the file a store was ingested from (TRK, NIfTI, SWC, …), which
// the ingest tools keep so that an export can restore what the vertices
// alone lose, such as a tractogram's voxel-to-RAS affine. ok is false when
// the store has no such header. It is read from the store version s
// answers for, when asked (exports are rare next to queries).
func (s *Store) SourceHeader(ctx context.Context, format string) (attrs json.RawMessage, ok bool, err error) {
	if format == "" || len(format) > 32 {
		return nil, false, s.errf(ErrBadQuery, -1, "", "", "header format %q", format)
	}
	for _, c := range format {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return nil, false, s.errf(ErrBadQuery, -1, "", "", "header format %q", format)
		}
	}
	raw, err := s.readGroupAttrs(ctx, "headers/"+format)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.wrap(kindOf(err), -1, "headers/"+format, "", fmt.Errorf("source header: %w", err))
	}
	return raw, true, nil
}
