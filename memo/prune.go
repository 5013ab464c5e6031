package memo

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// PruneOptions say what Prune removes besides what is always removed
// (records older than the store's MaxAge, the least recently used beyond
// its MaxBytes, invalid files, stale temporaries).
type PruneOptions struct {
	MaxBytes int64         // also bound the records to this size (0: the store's bound only)
	MaxAge   time.Duration // also remove records not used for longer (0: the store's only)
	All      bool          // remove every record
	DryRun   bool
}

// Usage is what a store holds.
type Usage struct {
	Records int
	Bytes   int64
}

// PruneReport says what Prune removed (or would have, for a dry run).
type PruneReport struct {
	Removed Usage
	Left    Usage
}

// entry is one file of the store.
type entry struct {
	name string
	size int64
	used time.Time
}

// scan lists the store's records, and the names of its debris (stale
// temporaries). Records that fail their checks are removed when read (Get).
func (s *Store) scan() (recs []entry, debris []string, err error) {
	d, err := s.root.Open(".")
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	des, err := d.ReadDir(-1)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	for _, de := range des {
		name := de.Name()
		if name == trimStamp {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // gone meanwhile
		}
		// Only what the store writes is ever removed: regular files named
		// as records or temporaries. Anything else (a directory, a link, a
		// file of another name) is not the store's and stays, whoever put it
		// there.
		if !info.Mode().IsRegular() {
			continue
		}
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			if now.Sub(info.ModTime()) > staleTmp {
				debris = append(debris, name)
			}
		case isKeyName(name):
			recs = append(recs, entry{name, info.Size(), info.ModTime()})
		}
	}
	return recs, debris, nil
}

func isKeyName(name string) bool {
	if len(name) != 2*len(Key{}) {
		return false
	}
	for _, c := range name {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Usage counts the store's records and their size.
func (s *Store) Usage() (Usage, error) {
	recs, _, err := s.scan()
	var u Usage
	for _, e := range recs {
		u.Records++
		u.Bytes += e.size
	}
	return u, err
}

// Prune removes, least recently used first, every record beyond the
// bounds (the store's, narrowed by o), and stale temporaries; it removes
// nothing else (see scan). A record a concurrent
// reader has open stays readable to it (Unix unlink semantics).
func (s *Store) Prune(o PruneOptions) (PruneReport, error) {
	var rep PruneReport
	recs, debris, err := s.scan()
	if err != nil {
		return rep, err
	}
	maxBytes, maxAge := s.o.MaxBytes, s.o.MaxAge
	if o.MaxBytes > 0 {
		maxBytes = min(maxBytes, o.MaxBytes)
	}
	if o.MaxAge > 0 {
		maxAge = min(maxAge, o.MaxAge)
	}
	// most recently used first: keep a prefix
	slices.SortFunc(recs, func(a, b entry) int { return b.used.Compare(a.used) })
	now := s.now()
	var errs []error
	full := o.All
	for _, e := range recs {
		// strictly LRU: once one record does not fit, no older one stays
		full = full || rep.Left.Bytes+e.size > maxBytes
		if !full && now.Sub(e.used) <= maxAge {
			rep.Left.Records++
			rep.Left.Bytes += e.size
			continue
		}
		rep.Removed.Records++
		rep.Removed.Bytes += e.size
		if !o.DryRun {
			errs = append(errs, ignoreGone(s.root.Remove(e.name)))
		}
	}
	for _, name := range debris {
		if !o.DryRun {
			errs = append(errs, ignoreGone(s.root.Remove(name))) // a regular file: never a tree
		}
	}
	return rep, errors.Join(errs...)
}

func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// maybeTrim prunes to the store's bounds unless some process did within
// trimInterval (the stamp's mtime says when).
func (s *Store) maybeTrim() {
	if st, err := s.root.Stat(trimStamp); err == nil && s.now().Sub(st.ModTime()) < trimInterval {
		return
	}
	if f, err := s.root.OpenFile(trimStamp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
		f.Close()
	}
	now := s.now()
	_ = s.root.Chtimes(trimStamp, now, now)
	_, _ = s.Prune(PruneOptions{})
}
