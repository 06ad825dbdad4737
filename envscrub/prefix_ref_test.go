package envscrub

// refPrefixTokens is the straightforward left-to-right scan that
// redactPrefixTokens must equal: every byte position, in order, is a
// possible token start. FuzzRedact cross-checks the two.
func refPrefixTokens(s string) string {
	var edits []edit
	for i := 0; i < len(s); i++ {
		if !tokenStart(s, i) {
			continue
		}
		end := -1
		for _, r := range tokenRules {
			if r.prefix[0] != s[i] {
				continue
			}
			if end = r.tokenEnd(s, i); end >= 0 {
				break
			}
		}
		if end < 0 && is(s[i], clLowerHex) && i+32 < len(s) && s[i+32] == '.' {
			end = zhipuEnd(s, i)
		}
		if end < 0 {
			continue
		}
		edits = append(edits, edit{i, end, maskToken(s[i:end])})
		i = end - 1
	}
	return applyEdits(s, edits)
}

// cleanNoReuse is Clean with a fresh allocation for every pass (nil
// rewriter): the buffer-reusing Clean must produce the same text.
func cleanNoReuse(f *Filter, text string) string {
	if text == "" {
		return text
	}
	text = StripANSI(text)
	text = f.exact.mask(text)
	if !f.p.patterns {
		return text
	}
	for round := 0; ; round++ {
		text = redactPatterns(nil, text)
		if !f.exact.recur {
			return text
		}
		again := f.exact.mask(text)
		if again == text || round == 3 {
			return again
		}
		text = again
	}
}
