package hwconfig

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mqttWith is the bundled MQTT config with its transport.mqtt section
// replaced by section (the lines after "  mqtt:").
func mqttWith(t *testing.T, section string) []byte {
	t.Helper()
	b, err := os.ReadFile("mqtt-sim.yaml")
	require.NoError(t, err)
	src := string(b)
	start := strings.Index(src, "  mqtt:\n")
	end := strings.Index(src, "\nbase:")
	require.Positive(t, start)
	require.Greater(t, end, start)
	return []byte(src[:start] + "  mqtt:\n" + section + "\n" + src[end:])
}

func TestMQTT_DefaultsFillEveryKnob(t *testing.T) {
	c, err := Parse(mqttWith(t, "    {}"))
	require.NoError(t, err)
	m := c.Transport.MQTT
	require.Equal(t, "robots", m.TopicPrefix)
	require.Equal(t, "127.0.0.1:1883", m.Listen, "no broker: the embedded one listens on loopback")
	require.Equal(t, 1, m.QoS)
	require.Equal(t, 500*time.Millisecond, m.AckTimeout.D())
	require.Equal(t, 5*time.Second, m.KeepAlive.D())
	require.Equal(t, 10*time.Second, m.ReconnectMax.D())
	require.Equal(t, 250*time.Millisecond, m.MaxClockSkew.D())

	c, err = Parse(mqttWith(t, "    broker: tcp://10.0.0.5:1883"))
	require.NoError(t, err)
	require.Empty(t, c.Transport.MQTT.Listen, "an external broker needs no embedded listener")
}

func TestMQTT_ValidationNamesTheFieldAndWhatIsAllowed(t *testing.T) {
	tests := []struct {
		name, section, field, allowed string
	}{
		{"embedded broker off loopback", "    listen: 0.0.0.0:1883", "transport.mqtt.listen", "a loopback host:port"},
		{"embedded listener beside a broker", "    broker: tcp://10.0.0.5:1883\n    listen: 127.0.0.1:1883", "transport.mqtt.listen", "empty when broker is set"},
		{"a password from two places", "    broker: tcp://10.0.0.5:1883\n    username: u\n    password_env: PW\n    password_file: /run/pw", "transport.mqtt.password_file", "password_env or password_file, not both"},
		{"a password without a username", "    broker: tcp://10.0.0.5:1883\n    password_env: PW", "transport.mqtt.username", "a username whenever a password is configured"},
		{"a certificate without its key", "    broker: ssl://10.0.0.5:8883\n    cert_file: /etc/c.pem", "transport.mqtt.key_file", "cert_file and key_file both set"},
		{"a QoS MQTT does not have", "    qos: 3", "transport.mqtt.qos", "1 or 2"},
		{"an ack timeout no network meets", "    ack_timeout: 1ms", "transport.mqtt.ack_timeout", "at least 10ms"},
		{"a keepalive below a second", "    keepalive: 500ms", "transport.mqtt.keepalive", "at least 1s"},
		{"a reconnect cap below the first backoff", "    reconnect_max: 100ms", "transport.mqtt.reconnect_max", "at least 1s"},
		{"a broker that is not a URL", "    broker: 10.0.0.5:1883", "transport.mqtt.broker", "a URL like tcp://127.0.0.1:1883"},
		{"a prefix with a wildcard", "    topic_prefix: robots/+", "transport.mqtt.topic_prefix", "without '+', '#'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(mqttWith(t, tc.section))
			_ = requireProblem(t, err, tc.field, tc.allowed)
		})
	}
}
