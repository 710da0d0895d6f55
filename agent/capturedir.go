package agent

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
)

// removeStaleCaptures deletes the capture files a crashed agent left in
// dir (<state_dir>/spool/capture): a capture lives there only while its
// job runs, and the state directory's lock says no other agent uses it.
func removeStaleCaptures(dir string, log zerolog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		log.Warn().Err(err).Str("dir", dir).Msg("list leftover captures")
		return
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "capture-") {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			log.Warn().Err(err).Str("file", e.Name()).Msg("remove leftover capture")
			continue
		}
		n++
	}
	if n > 0 {
		log.Info().Int("files", n).Str("dir", dir).Msg("removed captures left by an earlier run")
	}
}
