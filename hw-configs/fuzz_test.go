package hwconfig

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzParse from the fixtures")

// fuzzCorpusDir holds FuzzParse's seed corpus, one entry per fixture.
const fuzzCorpusDir = "testdata/fuzz/FuzzParse"

// fixtureSeeds maps a corpus entry name to the fixture it is made from.
func fixtureSeeds(tb testing.TB) map[string]string {
	tb.Helper()
	seeds := map[string]string{"shipped": shippedConfig}
	for _, kind := range []string{"good", "bad"} {
		files, err := filepath.Glob(filepath.Join("testdata", kind, "*.yaml"))
		require.NoError(tb, err)
		for _, f := range files {
			seeds[kind+"-"+strings.TrimSuffix(filepath.Base(f), ".yaml")] = f
		}
	}
	return seeds
}

// corpusEntry encodes b in the `go test fuzz v1` format.
func corpusEntry(b []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
}

func TestFuzzCorpus_MatchesFixtures(t *testing.T) {
	// Given the fixtures
	seeds := fixtureSeeds(t)
	if *updateCorpus {
		require.NoError(t, os.RemoveAll(fuzzCorpusDir))
		require.NoError(t, os.MkdirAll(fuzzCorpusDir, 0o755))
		for name, f := range seeds {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(fuzzCorpusDir, name), []byte(corpusEntry(b)), 0o644))
		}
	}

	// Then every fixture has an identical corpus entry (regenerate with
	// go test ./hw-configs -run TestFuzzCorpus -update-corpus)
	for name, f := range seeds {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(fuzzCorpusDir, name))
		require.NoError(t, err, "corpus entry for %s is missing; run with -update-corpus", f)
		require.Equal(t, corpusEntry(b), string(got), "corpus entry for %s is stale; run with -update-corpus", f)
	}
}

// FuzzParse feeds arbitrary bytes to the loader. Whatever comes in, Parse
// must not panic and must either refuse with ErrInvalid or return a config
// that validates, whose defaults are already complete, whose helpers agree
// with each other and which survives a YAML round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, path := range fixtureSeeds(f) {
		b, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			require.Nil(t, c)
			require.ErrorIs(t, err, ErrInvalid)
			require.NotEmpty(t, err.Error())
			return
		}

		require.NoError(t, c.Validate(), "a config that parses validates")
		again := c.Clone()
		again.ApplyDefaults()
		require.Equal(t, c, again, "re-applying defaults changes nothing")

		for _, name := range c.PoseNames() {
			j, err := c.PoseJoints(name)
			require.NoError(t, err, "pose %q", name)
			require.Len(t, j, len(c.JointNames()))
		}
		for _, tool := range c.ToolNames() {
			_, ok := c.ActionPolicy(tool)
			require.True(t, ok, "tool %s has a policy", tool)
		}
		require.Len(t, c.Actions, len(c.ToolNames()), "no policy for a tool the robot lacks")

		out, err := yaml.Marshal(c)
		require.NoError(t, err)
		back, err := Parse(out)
		require.NoError(t, err, "re-parse of:\n%s", out)
		require.Equal(t, c, back, "round trip of:\n%s", out)
	})
}
