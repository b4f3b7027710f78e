package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The repository's design document, docs/DESIGN.md, is cited by section
// from code comments, and its tables state the error taxonomy and the
// task lifecycle. These tests keep the citations pointing at sections that
// exist and the tables equal to the code.

const repoRoot = "../.."

func readDesign(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "DESIGN.md"))
	require.NoError(t, err)
	return string(b)
}

// designSections returns the section numbers of docs/DESIGN.md's headings
// ("1", "3", "3.1", …).
func designSections(t *testing.T, doc string) []string {
	t.Helper()
	var secs []string
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (\d+(?:\.\d+)?)\.? `).FindAllStringSubmatch(doc, -1) {
		secs = append(secs, m[1])
	}
	return secs
}

func TestDesign_HasTheSectionsCodeCites(t *testing.T) {
	// Given the design document
	secs := designSections(t, readDesign(t))

	// Then its sections are numbered as code comments cite them
	want := []string{"1", "2", "3", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4", "5", "6"}
	require.Equal(t, want, secs)
}

// TestDesignReferences_PointAtSectionsThatExist scans the repository's Go,
// Markdown and proto files: a reference to a design document outside the
// repository fails, and every "DESIGN.md §N" names a section docs/DESIGN.md
// has (§4 with "invariant N" for 1–12).
func TestDesignReferences_PointAtSectionsThatExist(t *testing.T) {
	doc := readDesign(t)
	secs := designSections(t, doc)
	cite := regexp.MustCompile(`DESIGN\.md\s+§\s*(\d+(?:\.\d+)?)(?:\s*[–-]\s*(\d+(?:\.\d+)?))?`)
	outside := regexp.MustCompile(`\.\./shared|shared/DESIGN\.md|/work/`)
	var bad []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "var", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains([]string{".go", ".md", ".proto"}, filepath.Ext(path)) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "DESIGN.md") {
				continue
			}
			if outside.MatchString(line) {
				bad = append(bad, rel+":"+strconv.Itoa(i+1)+": points outside the repository: "+strings.TrimSpace(line))
			}
			for _, m := range cite.FindAllStringSubmatch(line, -1) {
				for _, sec := range m[1:] {
					if sec != "" && !slices.Contains(secs, sec) {
						bad = append(bad, rel+":"+strconv.Itoa(i+1)+": docs/DESIGN.md has no §"+sec+": "+strings.TrimSpace(line))
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad, "design references that lead nowhere")
}

// tableRows returns the rows of the first Markdown table after heading,
// each as its trimmed cells, without the header and separator rows.
func tableRows(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n"+heading+"\n")
	require.True(t, ok, "docs/DESIGN.md has no heading %q", heading)
	var rows [][]string
	started := false
	for line := range strings.SplitSeq(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		var cells []string
		for c := range strings.SplitSeq(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	require.GreaterOrEqual(t, len(rows), 2, "no table under %q", heading)
	return rows[2:]
}

func TestDesign_ErrorTableIsToolerr(t *testing.T) {
	// Given §3.3's table of error types
	rows := tableRows(t, readDesign(t), "### 3.3 Error types")

	// Then it lists exactly the closed set, in its order, each with the
	// retry rule, default wait and default suggestion the code gives it
	var got, want []string
	for _, r := range rows {
		require.Len(t, r, 4, "row %v", r)
		got = append(got, strings.Join(r, " | "))
	}
	for _, ty := range toolerr.Types() {
		info := toolerr.InfoOf(ty)
		retry := "no"
		if info.Retryable {
			retry = "yes"
		}
		want = append(want, strings.Join([]string{
			"`" + string(ty) + "`", retry,
			strconv.FormatInt(toolerr.DefaultRetryAfter(ty).Milliseconds(), 10), info.Suggestion,
		}, " | "))
	}
	require.Equal(t, want, got)
}

func TestDesign_LifecycleTableIsTheFSM(t *testing.T) {
	// Given §3.4's table of states and its list of terminal states
	doc := readDesign(t)
	rows := tableRows(t, doc, "### 3.4 Action lifecycle")
	m := regexp.MustCompile(`The terminal states are ([^.]+)\.`).FindStringSubmatch(strings.ReplaceAll(doc, "\n", " "))
	require.NotNil(t, m, "§3.4 must name the terminal states")

	// Then the table names every state of the fsm, in lifecycle order,
	// and the terminal ones are exactly those no event leaves
	var got, wantTerminal, gotTerminal []string
	for _, r := range rows {
		got = append(got, strings.Trim(r[0], "`"))
	}
	var want []string
	for _, s := range fsm.AllStates() {
		want = append(want, s.String())
		if s.Terminal() {
			wantTerminal = append(wantTerminal, s.String())
		}
	}
	require.Equal(t, want, got)
	for _, q := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[1], -1) {
		gotTerminal = append(gotTerminal, q[1])
	}
	require.Equal(t, wantTerminal, gotTerminal)
}
