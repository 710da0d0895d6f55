package capture

// EffectCounts returns, for every effect key, how many operations of an
// effect step carrying that key the phone received, whatever their outcome:
// a step run twice counts two. Operations without a key are not counted.
func (s *Simulated) EffectCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, c := range s.history {
		if c.EffectKey != "" {
			out[c.EffectKey]++
		}
	}
	return out
}
