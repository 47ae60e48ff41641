package zvf

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// format is the on-disk generation a store's zv_version names.
type format int

const (
	format07 format = iota // 0.6.x, 0.7.x: an array per chunk (zvf-format)
	format09               // 0.9.0–0.9.4: chunk-grid arrays (zvf-0.9-format)
)

// newest09 is the last 0.9 revision whose changes are known (the digest's
// §6: 0.9.2 adds vlen_manifests_v2, 0.9.4 dense manifests, refused).
const newest09 = 4

const readVersions = "0.6.x, 0.7.x and 0.9.0–0.9.4"

// parseVersion classifies zv_version: major.minor[.patch], digits only.
// 0.8 is reported apart: three short-lived layouts share it.
func parseVersion(v string) (f format, minor, patch int, err error) {
	parts := strings.Split(v, ".")
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, e := strconv.Atoi(p)
		if e != nil || n < 0 || strconv.Itoa(n) != p || len(parts) < 2 || len(parts) > 3 {
			return 0, 0, 0, fmt.Errorf("zv_version %q is not a version this server knows; it reads %s", v, readVersions)
		}
		nums[i] = n
	}
	if len(nums) == 3 {
		patch = nums[2]
	}
	switch {
	case nums[0] == 0 && (nums[1] == 6 || nums[1] == 7):
		return format07, nums[1], patch, nil
	case nums[0] == 0 && nums[1] == 8:
		return 0, 8, patch, nil
	case nums[0] == 0 && nums[1] == 9 && patch <= newest09:
		return format09, 9, patch, nil
	case nums[0] == 0 && nums[1] == 9:
		return 0, 0, 0, fmt.Errorf("zv_version %q is newer than the 0.9 revisions this server knows (0.9.0–0.9.%d): %s", v, newest09, newerHint)
	case nums[0] > 0 || nums[1] > 9:
		return 0, 0, 0, fmt.Errorf("zv_version %q is newer than this server reads (%s): %s", v, readVersions, newerHint)
	}
	return 0, 0, 0, fmt.Errorf("zv_version %q is not supported; this server reads %s", v, readVersions)
}

// newerHint is what the owner of a store newer than this server can do.
const newerHint = "serve it with a newer zvfserve (zvfserve version says which this is), or write it with a version listed"

// migrate08 is what a 0.8 store's owner can do.
const migrate08 = "migrate the store to ZVF 0.9.0 with the zarr-vectors development line (AllenInstitute/zarr-vectors-py) and serve that"

// refuse08 names which 0.8 layout a store holds (zvf-0.9-format §2): the
// three layouts that all call themselves 0.8.0 differ in their
// cross_chunk_links, which the first level tells apart.
func (s *Store) refuse08(ctx context.Context, version string, caps []string) error {
	level := "0"
	if names, err := s.levelNames(ctx); err == nil && len(names) > 0 {
		level = strconv.Itoa(names[0])
	}
	ccl := level + "/cross_chunk_links"
	variant := ""
	where := ""
	if lst, err := s.st.List(ctx, ccl+"/"); err == nil {
		for _, p := range lst.Prefixes {
			d := strings.TrimSuffix(strings.TrimPrefix(p, ccl+"/"), "/")
			if _, ok := parseDelta(d); !ok {
				continue
			}
			where = ccl + "/" + d
			var a struct {
				Layout   string `json:"layout"`
				Directed *bool  `json:"directed"`
				Store    string `json:"store"`
			}
			if raw, err := s.readGroupAttrs(ctx, where); err == nil {
				_ = json.Unmarshal(raw, &a) // unreadable attributes leave the variant unknown
			}
			switch {
			case a.Layout == "partitioned_v1":
				variant = "partitioned cross-chunk links (layout partitioned_v1: a leaf per sorted tuple of chunks)"
			case a.Layout == "sharded_v1":
				variant = "partitioned cross-chunk links (layout sharded_v1: kK sharded variable-length arrays)"
			case a.Directed != nil || a.Store != "":
				variant = "per-tuple cross-chunk link cells with perm_idx (0.8.0/0.8.1, the line that became 0.9)"
			}
			if variant != "" {
				break
			}
		}
	}
	if variant == "" && slices.Contains(caps, "partitioned_cross_chunk_links") {
		variant, where = "partitioned cross-chunk links (capability partitioned_cross_chunk_links)", "zarr.json"
	}
	if variant == "" {
		return s.errf(ErrUnsupported, -1, "", "", "zv_version %q: a ZVF 0.8 layout this server does not read; %s", version, migrate08)
	}
	return s.errf(ErrUnsupported, -1, "", "", "zv_version %q, ZVF 0.8 %s (%s): not read; %s", version, variant, where, migrate08)
}
