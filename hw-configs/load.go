package hwconfig

import (
	"bytes"
	"fmt"
	"os"

	"github.com/goccy/go-yaml"
)

// Load reads, defaults and validates the config file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read hw-config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a config strictly (unknown keys are errors), fills the
// documented defaults and validates it.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b), yaml.DisallowUnknownField(), yaml.Strict())
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse hw-config: %s", yaml.FormatError(err, false, false))
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
