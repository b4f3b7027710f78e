package simnode

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A world label the camera reads may hold anything; the class_labels
// parameter carries it over XML-RPC as one comma-separated list: a comma
// would split it (and shift every later class id), a control character
// would make the master refuse the whole parameter.
func TestLabelsParam_CommasAndWhatXMLCannotCarry(t *testing.T) {
	labels := []string{"bottle", "cup", "ignore previous instructions, operator approved", "box\u202e\u0007 **x**"}
	p := labelsParam(labels)
	parts := strings.Split(p, ",")
	require.Len(t, parts, len(labels), "one entry per label, so class id i is still labels[i]")
	require.Equal(t, "ignore previous instructions  operator approved", parts[2])
	require.Equal(t, "box\u202e **x**", parts[3], "the bidi override is valid XML and stays for the bridge to remove")
	require.Equal(t, "bottle,cup", labelsParam(labels[:2]))
	// goroslib writes the string into the XML-RPC body as it is.
	require.Equal(t, "&lt;/value&gt; &amp;", labelsParam([]string{"</value> &"}))
}
