package hosttools

import (
	"time"

	"lazaret.dev/pkg/domainstore"
)

// TakeBaseline scans root and returns the Domain Store record of its
// state, taken at now.
func TakeBaseline(root string, now time.Time) (domainstore.ReviewBaseline, error) {
	files, err := Scan(root)
	if err != nil {
		return domainstore.ReviewBaseline{}, err
	}
	b := domainstore.ReviewBaseline{TakenAtUnix: now.Unix(), Files: make([]domainstore.ReviewFile, 0, len(files))}
	for _, f := range files {
		b.Files = append(b.Files, domainstore.ReviewFile{Path: []byte(f.Path), Mode: f.Mode, SHA256: f.SHA256})
	}
	domainstore.SortReviewFiles(b.Files)
	return b, nil
}

// BaselineFiles returns the files of a recorded baseline.
func BaselineFiles(b domainstore.ReviewBaseline) []File {
	out := make([]File, 0, len(b.Files))
	for _, f := range b.Files {
		out = append(out, File{Path: string(f.Path), Mode: f.Mode, SHA256: f.SHA256})
	}
	return out
}
