package zarr

// Storage reads are bounded by what the metadata says a stored chunk can
// hold, so a chunk file replaced by something huge is refused after
// reading one byte more than that, not read whole.

// MaxMetadataBytes bounds one zarr.json document.
const MaxMetadataBytes = 64 << 20

// compressSlack is what any supported bytes→bytes codec may add to its
// input in the worst case (incompressible data): zstd's and deflate's
// stored blocks, blosc's memcpy frames and block tables, a checksum.
func compressSlack(n int64) int64 { return n/16 + 4096 }

// storedBound is the most bytes a stored chunk of this pipeline can take.
func (p *pipeline) storedBound(max int64) int64 {
	n := p.ab.encodedSize(p.abIn)
	if s, ok := p.ab.(*shardingCodec); ok {
		inner := s.innerPipe.storedBound(max)
		if s.n > 0 && inner > (1<<62)/s.n {
			n = 1 << 62
		} else {
			n = s.n*inner + s.indexLen
		}
	}
	if n < 0 || n > max {
		n = max
	}
	return p.withSlack(n)
}

// withSlack is the most bytes n bytes can take once stored through the
// pipeline's bytes→bytes codecs. withSlack(max) bounds any stored chunk
// of these codecs, whatever its shape.
func (p *pipeline) withSlack(n int64) int64 {
	for range p.bb {
		n += compressSlack(n)
	}
	return n
}

// chunkBound is the read bound for one stored chunk of a.
func (a *Array) chunkBound() int64 { return a.pipe.storedBound(a.lim.MaxChunkBytes) }
