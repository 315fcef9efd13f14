package tally

import "sort"

// WordCount is one word and how often it occurred.
type WordCount struct {
	Word  string
	Count int
}

// Top returns the n most frequent words, most frequent first, ties in
// lexical order; n <= 0 returns them all.
func (t *Tally) Top(n int) []WordCount {
	all := make([]WordCount, 0, len(t.words))
	for w, c := range t.words {
		all = append(all, WordCount{w, c})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Count != all[j].Count {
			return all[i].Count > all[j].Count
		}
		return all[i].Word < all[j].Word
	})
	if n > 0 && n < len(all) {
		all = all[:n]
	}
	return all
}
