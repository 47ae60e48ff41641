package zarr

// pipeline is a resolved codec chain for one array.
type pipeline struct {
	aa    []arrayToArray
	aaIn  []rep // input representation of each aa codec
	ab    arrayToBytes
	abIn  rep
	bb    []bytesToBytes
	specs []CodecSpec
	// maxOut bounds the bytes→bytes outputs whose size the metadata does
	// not fix: MaxChunkBytes.
	maxOut int64
}

// build resolves a codec chain whose decoded chunks have representation
// in; what names that chunk in errors.
func (cs *Codecs) build(what string, specs []CodecSpec, in rep) (*pipeline, error) {
	p := &pipeline{specs: specs, maxOut: cs.lim.MaxChunkBytes}
	// Before any codec is made: codecs size their own tables (a shard
	// index, a vlen index) from the shape.
	if err := cs.checkRep(what, in); err != nil {
		return nil, err
	}
	cur := in
	i := 0
	for ; i < len(specs); i++ {
		c, err := cs.newCodec(specs[i], cur)
		if err != nil {
			return nil, err
		}
		switch {
		case c.aa != nil:
			if p.ab != nil {
				return nil, metaErr("codec %s (array→array) after the array→bytes codec", specs[i].Name)
			}
			o, err := c.aa.out(cur)
			if err != nil {
				return nil, err
			}
			if err := cs.checkRep(what+" (encoded by "+specs[i].Name+")", o); err != nil {
				return nil, err
			}
			p.aa = append(p.aa, c.aa)
			p.aaIn = append(p.aaIn, cur)
			cur = o
		case c.ab != nil:
			if p.ab != nil {
				return nil, metaErr("more than one array→bytes codec")
			}
			p.ab = c.ab
			p.abIn = cur
		default:
			if p.ab == nil {
				return nil, metaErr("codec %s (bytes→bytes) before the array→bytes codec", specs[i].Name)
			}
			p.bb = append(p.bb, c.bb)
		}
	}
	if p.ab == nil {
		return nil, metaErr("codec chain has no array→bytes codec")
	}
	return p, nil
}

// newCodec resolves one codec spec for input in.
func (cs *Codecs) newCodec(s CodecSpec, in rep) (resolved, error) {
	mk, ok := cs.makers[s.Name]
	if !ok {
		return resolved{}, unsupported("codec %q", s.Name)
	}
	return mk(cs, s, in)
}

// decode runs the chain backwards over one stored chunk.
func (p *pipeline) decode(b []byte) (*Chunk, error) {
	final := p.ab.encodedSize(p.abIn)
	for i := len(p.bb) - 1; i >= 0; i-- {
		// Only the codec next to the array→bytes codec can have an exact
		// output size; the others are bounded by a generous expansion of
		// the final size (or of MaxChunkBytes when that is not fixed).
		size := upTo(maxExpand(int64(len(b)), final, p.maxOut))
		if i == 0 && final >= 0 {
			size = outSize{exact: final, max: final}
		}
		out, err := p.bb[i].decode(b, size)
		if err != nil {
			return nil, &Error{Codec: p.bb[i].name(), Err: err}
		}
		b = out
	}
	c, err := p.ab.decode(b, p.abIn)
	if err != nil {
		return nil, &Error{Codec: p.ab.name(), Err: err}
	}
	for i := len(p.aa) - 1; i >= 0; i-- {
		c, err = p.aa[i].decode(c, p.aaIn[i])
		if err != nil {
			return nil, &Error{Codec: p.aa[i].name(), Err: err}
		}
	}
	return c, nil
}

// maxExpand bounds an intermediate decoded size: the final size (else the
// chunk limit) plus the framing a checksum or compressor may add.
func maxExpand(in, final, limit int64) int64 {
	if final < 0 {
		final = limit
	}
	return final + 1<<20 + in
}

func (p *pipeline) encode(c *Chunk) ([]byte, error) {
	var err error
	for i, aa := range p.aa {
		if c, err = aa.encode(c); err != nil {
			return nil, &Error{Codec: p.aa[i].name(), Err: err}
		}
	}
	b, err := p.ab.encode(c, p.abIn)
	if err != nil {
		return nil, &Error{Codec: p.ab.name(), Err: err}
	}
	for _, bb := range p.bb {
		if b, err = bb.encode(b); err != nil {
			return nil, &Error{Codec: bb.name(), Err: err}
		}
	}
	return b, nil
}
