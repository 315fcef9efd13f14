package domainstore

import "lazaret.dev/pkg/store/codec"

func encodeForTest(v any) ([]byte, error) { return codec.Marshal(v) }
func decodeForTest(b []byte, v any) error { return codec.Unmarshal(b, v) }
