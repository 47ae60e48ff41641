package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/api/problem"
)

// representation is what one answer is sent as: its codec (format) and
// its content coding. It is chosen once per request (f=, Accept,
// Accept-Encoding) and names the answer's ETag, since each pair is
// different bytes.
type representation struct {
	codec    codec
	encoding string // "zstd", "gzip" or "" (identity)
}

// negotiate picks the representation of an answer among codecs (the
// server's preference first). f= decides the format when given (the
// route's parameter check has vetted it); otherwise Accept does, by its
// q-values (RFC 9110: q=0 excludes), and nothing acceptable is a 406. Only
// compressible formats get a content coding.
func negotiate(r *http.Request, codecs []codec) (representation, error) {
	var rep representation
	if f := query(r).Get("f"); f != "" {
		i := slices.IndexFunc(codecs, func(c codec) bool { return c.format() == f })
		if i < 0 {
			names := make([]string, len(codecs))
			for k, c := range codecs {
				names[k] = c.format()
			}
			return rep, badRequest(fmt.Sprintf("f=%q: use %s", f, orList(names)))
		}
		rep.codec = codecs[i]
	} else if accept := reqHeader(r, "Accept"); accept == "" {
		rep.codec = codecs[0]
	} else {
		best, bestQ := -1, 0.0
		for i, c := range codecs {
			if q := acceptQ(accept, c.contentType()); q > bestQ {
				best, bestQ = i, q
			}
		}
		if best < 0 {
			// Formats may share a media type (Arrow and GeoArrow): name each once.
			var names []string
			for _, c := range codecs {
				if m := c.contentType(); !slices.Contains(names, m) {
					names = append(names, m)
				}
			}
			return rep, notAcceptable(fmt.Sprintf("Accept %q allows none of %s (or use f=)", accept, strings.Join(names, ", ")))
		}
		rep.codec = codecs[best]
	}
	if rep.codec.compressible() {
		rep.encoding = contentCoding(reqHeader(r, "Accept-Encoding"))
	}
	return rep, nil
}

// withPrecision applies the request's precision= to rep: the largest
// error per coordinate the client accepts, in store units, which only
// the binary format can carry (kind 6 blocks); with any other format it
// is a 400, not ignored, so a client never takes exact coordinates for
// quantized ones or the reverse.
func withPrecision(r *http.Request, rep representation) (representation, error) {
	v := query(r).Get("precision")
	if v == "" {
		return rep, nil
	}
	p, err := strconv.ParseFloat(v, 64)
	if err != nil || !(p > 0) || p > 1e300 {
		return rep, badRequest(fmt.Sprintf("precision=%q: give the largest error per coordinate you accept, a positive number in store units, at most 1e300", v))
	}
	if _, ok := rep.codec.(binaryCodec); !ok {
		return rep, badRequest(fmt.Sprintf("precision= needs the binary format (f=bin); f=%s sends coordinates as stored", rep.codec.format()))
	}
	rep.codec = binaryCodec{precision: p}
	return rep, nil
}

// acceptQ is the q-value the Accept header gives media type mt (RFC 9110
// 12.5.1): that of the most specific range naming it — type/subtype, then
// type/*, then */* —, compared without regard to case (8.3.1); 0 when
// none does, or when the one that does says q=0 or an unreadable q. Media
// type parameters other than q are not compared.
func acceptQ(accept, mt string) float64 {
	typ, _, _ := strings.Cut(mt, "/")
	q, spec := 0.0, -1
	for part := range strings.SplitSeq(accept, ",") {
		rng, params, _ := strings.Cut(part, ";")
		rng = strings.TrimSpace(rng)
		s := -1
		if strings.EqualFold(rng, mt) {
			s = 2
		} else if t, sub, ok := strings.Cut(rng, "/"); ok && sub == "*" {
			if t == "*" {
				s = 0
			} else if strings.EqualFold(t, typ) {
				s = 1
			}
		}
		if s < 0 || s < spec {
			continue
		}
		v := qValue(params)
		if s > spec || v > q {
			q, spec = v, s
		}
	}
	return q
}

// qValue is the q parameter among a header element's parameters: 1 when
// absent, 0 when unreadable or outside [0, 1].
func qValue(params string) float64 {
	v := 1.0
	for p := range strings.SplitSeq(params, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil || !(f >= 0 && f <= 1) {
				f = 0
			}
			v = f
		}
	}
	return v
}

// contentCoding picks zstd, gzip or identity ("") from Accept-Encoding by
// its q-values, the server's preference (zstd, gzip, identity) breaking
// ties. A coding given q=0 is never used; identity is the fallback even
// when excluded, as RFC 9110 allows.
func contentCoding(header string) string {
	q := map[string]float64{}
	star := -1.0
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		v := qValue(params)
		if name == "*" {
			star = v
			continue
		}
		q[name] = v
	}
	weight := func(c string) float64 {
		if v, ok := q[c]; ok {
			return v
		}
		if star >= 0 {
			return star
		}
		if c == "identity" {
			return 0.001 // acceptable unless excluded (RFC 9110 12.5.3)
		}
		return 0
	}
	best, bestQ := "", 0.0
	for _, c := range []string{"zstd", "gzip", "identity"} {
		if w := weight(c); w > bestQ {
			best, bestQ = c, w
		}
	}
	if best == "identity" {
		return ""
	}
	return best
}

func notAcceptable(detail string) *Problem {
	return problem.New(problem.NotAcceptable, detail)
}

// orList joins choices for a message: "a", "a or b", "a, b or c".
func orList(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}
