package hwconfig

// ApplyDefaults fills every optional field that is zero with its documented
// default.
func (c *Config) ApplyDefaults() {
	// TODO(helper): complete.
}

// Validate checks the whole config and returns every problem found.
func (c *Config) Validate() error {
	return nil
}
