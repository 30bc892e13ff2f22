package app

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeListsEverySetting keeps the configuration tables in step with
// settings(): docs/OPERATIONS.md lists every variable the service reads
// once, with its flag and the default defined in defaults.go, and nothing
// the service does not read; the README's short table of the settings a
// first deployment sets shows each of them as OPERATIONS does.
func TestReadmeListsEverySetting(t *testing.T) {
	t.Parallel()
	var c Config
	settings := c.settings()
	check := func(doc string, rows map[string][]string, every bool) {
		t.Helper()
		for _, s := range settings {
			cells, ok := rows[s.env]
			if !ok {
				if every {
					t.Errorf("%s's configuration table lacks %s", doc, s.env)
				}
				continue
			}
			delete(rows, s.env)
			if len(cells) != 4 {
				t.Errorf("%s row of %s: got %d cells, want 4 (variable, flag, meaning, default)", doc, s.env, len(cells))
				continue
			}
			if want := "`-" + s.flag + "`"; cells[1] != want {
				t.Errorf("%s row of %s: flag got %s, want %s", doc, s.env, cells[1], want)
			}
			if want := s.documented(); cells[3] != want {
				t.Errorf("%s row of %s: default got %q, want %q", doc, s.env, cells[3], want)
			}
		}
		for env := range rows {
			t.Errorf("%s lists %s, which the service does not read", doc, env)
		}
	}
	check("docs/OPERATIONS.md", settingRows(t, "../../docs/OPERATIONS.md"), true)
	readme := settingRows(t, "../../README.md")
	if len(readme) == 0 {
		t.Error("README.md shows no setting")
	}
	check("README.md", readme, false)
}

// settingRows reads the rows of the configuration table in the file at
// path, by variable.
func settingRows(t *testing.T, path string) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `SECKILL_") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		env := strings.Trim(cells[0], "`")
		if _, dup := rows[env]; dup {
			t.Errorf("%s lists %s twice", path, env)
		}
		rows[env] = cells
	}
	return rows
}

// TestNoCrashInjectionInProduction: the production build has no
// fault-injection setting, whatever the environment says.
func TestNoCrashInjectionInProduction(t *testing.T) {
	t.Parallel()
	if FaultInjection {
		t.Skip("built with -tags faultinject")
	}
	if hook := crashAfterCommit(func(string) string { return "1" }); hook != nil {
		t.Error("crashAfterCommit: got a hook in a build without the faultinject tag")
	}
	var c Config
	for _, s := range c.settings() {
		if strings.Contains(s.env, "CRASH") {
			t.Errorf("setting %s is a fault-injection point in the production build", s.env)
		}
	}
}

// TestDocsLinksResolve: every relative link (and image) in the README, in
// docs/ and in loadtest/README.md names a file of the repository, and a
// #fragment names a heading of that file, as GitHub spells its anchors.
func TestDocsLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "loadtest", "README.md")}, docs...)
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range markdownLinks(string(b)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			name, fragment, _ := strings.Cut(target, "#")
			path := filepath.Clean(file)
			if name != "" {
				path = filepath.Join(filepath.Dir(file), name)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: no such file", file, target)
					continue
				}
			}
			if fragment != "" && !anchorsOf(path)[fragment] {
				t.Errorf("%s: link %s: %s has no heading #%s", file, target, path, fragment)
			}
		}
	}
	if links < 20 {
		t.Errorf("found %d relative links in %d files, want at least 20 (is the link pattern still right?)", links, len(files))
	}
}

var (
	markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	codeSpan     = regexp.MustCompile("`[^`]*`")
	notInAnchor  = regexp.MustCompile(`[^\p{L}\p{M}\p{N}_\- ]`)
)

// markdownLinks is the target of each inline link and image outside code.
func markdownLinks(md string) []string {
	var out []string
	for _, line := range proseLines(md) {
		for _, m := range markdownLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors is the set of anchors GitHub makes of a document's
// headings: lower case, punctuation dropped, spaces as hyphens, and -1, -2…
// after a repeat.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, line := range proseLines(md) {
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		a := strings.ToLower(strings.TrimSpace(line[level:]))
		a = strings.ReplaceAll(notInAnchor.ReplaceAllString(a, ""), " ", "-")
		for i, base := 1, a; out[a]; i++ {
			a = base + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// proseLines is the document's lines outside fenced code blocks.
func proseLines(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}
