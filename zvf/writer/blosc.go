package writer

import "errors"

// errNoBlosc is returned for CodecBlosc until a blosc encoder is wired in.
var errNoBlosc = errors.New("blosc encoding is not supported by this build")

func bloscCodec() (*blobCodec, error) { return nil, errNoBlosc }
