package zvf

import "github.com/zvfserve/zvfserve/zvf/zarr"

// NewColumn is a column of rows of channels values of dtype (a Zarr v3
// data type name) held in data, little-endian: what an encoder is given,
// built by hand (tests of the API's encoders).
func NewColumn(name, dtype string, channels int, data []byte) (Column, error) {
	dt, err := zarr.ParseDataType(dtype)
	if err != nil {
		return Column{}, err
	}
	return Column{Name: name, DType: dt.Name, Channels: channels, Data: data, typ: dt}, nil
}
