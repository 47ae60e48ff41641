package sharding_test

import (
	"bytes"
	"fmt"

	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
)

// Pack five chunks into shards, then read one back as a client would.
func ExampleBuilder() {
	chunks := map[uint64]string{1: "one", 2: "two", 3: "three", 1000: "thousand", 1 << 40: "big"}
	var total int64
	for _, d := range chunks {
		total += int64(len(d))
	}
	shardBits, minishardBits := sharding.ChooseBits(len(chunks), total)
	spec := sharding.Spec{
		Hash:                   sharding.Murmur,
		ShardBits:              shardBits,
		MinishardBits:          minishardBits,
		MinishardIndexEncoding: sharding.Gzip,
		DataEncoding:           sharding.Gzip,
	}
	b, err := sharding.NewBuilder(spec)
	if err != nil {
		panic(err)
	}
	for k, d := range chunks {
		b.Add(k, []byte(d))
	}
	files := map[string][]byte{}
	err = b.WriteAll(func(name string, data []byte) error {
		files[name] = data
		return nil
	})
	if err != nil {
		panic(err)
	}

	shard, _ := spec.Locate(1000)
	file := files[spec.ShardFile(shard)]
	r, err := sharding.NewReader(spec, shard, bytes.NewReader(file), int64(len(file)))
	if err != nil {
		panic(err)
	}
	data, err := r.Get(1000)
	fmt.Println(len(files), spec.ShardFile(shard), string(data), err)
	// Output: 1 0.shard thousand <nil>
}
