package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// Sentinel errors callers branch on.
var (
	// ErrLinkDown means the call could not reach the robot: no broker
	// connection, the robot's status is offline (its last will), or no
	// state arrived within the state timeout.
	ErrLinkDown = errors.New("MQTT link to the robot is down")
	// ErrNoAck means the robot did not answer a command within ack_timeout.
	ErrNoAck = errors.New("the robot did not acknowledge the command")
	// ErrRefused means the robot answered a command with a failed ack.
	ErrRefused = errors.New("the robot refused the command")
	// ErrSuperseded means a Stop was issued while the command awaited its
	// ack; the driver followed the robot's acceptance with another stop.
	ErrSuperseded = errors.New("command superseded by a stop issued while it awaited acceptance")
	// ErrAlreadyStarted means Start was called twice.
	ErrAlreadyStarted = errors.New("MQTT driver already started")
	// ErrFenced means this bridge does not hold the robot's lease (a
	// cluster of bridges): its fence says so, and nothing was published;
	// or the robot itself refused a command for its stale epoch.
	ErrFenced = errors.New("fenced: this bridge does not hold the robot's lease")
)

// CommandError is a motion command that did not start: refused by the
// robot, unanswered, or superseded.
type CommandError struct {
	ID     string
	Action string
	// Reason is the robot's own words for a refusal, empty otherwise.
	Reason string
	Err    error
}

// Error implements error.
func (e *CommandError) Error() string {
	s := fmt.Sprintf("mqtt command %s %q: %v", e.Action, e.ID, e.Err)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns the sentinel.
func (e *CommandError) Unwrap() error { return e.Err }

// Connection is how a client (the bridge's driver, a simulated robot)
// reaches the broker. Its LogValue leaves the password out.
type Connection struct {
	// Broker is the broker URL (tcp://, ssl://, tls://, mqtt://, mqtts://,
	// ws://, wss://).
	Broker   string
	ClientID string
	Username string
	Password string
	// TLS is nil for a plain connection.
	TLS          *tls.Config
	KeepAlive    time.Duration
	ReconnectMax time.Duration
}

// LogValue implements slog.LogValuer: the broker without user info, the
// client id, the username and whether TLS is on — never the password.
func (c Connection) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("broker", redactURL(c.Broker)), slog.String("client_id", c.ClientID),
		slog.String("username", c.Username), slog.Bool("tls", c.TLS != nil),
	)
}

// redactURL drops the user info of a URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable broker URL)"
	}
	u.User = nil
	return u.String()
}

// ConnectionFrom builds the connection of a hw-config's transport.mqtt
// section (defaults applied), for the client clientID. broker overrides
// the section's broker (the embedded broker's URL); env reads the
// password_env variable.
func ConnectionFrom(m *hwconfig.MQTTConf, broker, clientID string, env func(string) string) (Connection, error) {
	if m == nil {
		return Connection{}, errors.New("mqtt: the hw-config has no transport.mqtt section")
	}
	if broker == "" {
		broker = m.Broker
	}
	if broker == "" {
		return Connection{}, errors.New("mqtt: no broker URL (transport.mqtt.broker is empty and no embedded broker runs)")
	}
	c := Connection{
		Broker: broker, ClientID: clientID, Username: m.Username,
		KeepAlive: m.KeepAlive.D(), ReconnectMax: m.ReconnectMax.D(),
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = hwconfig.DefaultMQTTKeepAlive
	}
	if c.ReconnectMax <= 0 {
		c.ReconnectMax = hwconfig.DefaultMQTTReconnectMax
	}
	switch {
	case m.PasswordEnv != "":
		if env == nil {
			env = os.Getenv
		}
		c.Password = env(m.PasswordEnv)
		if c.Password == "" {
			return Connection{}, fmt.Errorf("mqtt: transport.mqtt.password_env names %s, which is not set or empty", m.PasswordEnv)
		}
	case m.PasswordFile != "":
		raw, err := os.ReadFile(m.PasswordFile)
		if err != nil {
			return Connection{}, fmt.Errorf("mqtt: transport.mqtt.password_file: %w", err)
		}
		c.Password = strings.TrimRight(string(raw), "\r\n")
		if c.Password == "" {
			return Connection{}, fmt.Errorf("mqtt: transport.mqtt.password_file %s is empty", m.PasswordFile)
		}
	}
	u, err := url.Parse(broker)
	if err != nil {
		return Connection{}, fmt.Errorf("mqtt: broker URL %q: %w", redactURL(broker), err)
	}
	secure := u.Scheme == "ssl" || u.Scheme == "tls" || u.Scheme == "mqtts" || u.Scheme == "wss"
	if secure || m.CAFile != "" || m.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
		if m.CAFile != "" {
			pem, err := os.ReadFile(m.CAFile)
			if err != nil {
				return Connection{}, fmt.Errorf("mqtt: transport.mqtt.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return Connection{}, fmt.Errorf("mqtt: transport.mqtt.ca_file %s holds no PEM certificate", m.CAFile)
			}
			tc.RootCAs = pool
		}
		if m.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(m.CertFile, m.KeyFile)
			if err != nil {
				return Connection{}, fmt.Errorf("mqtt: transport.mqtt.cert_file/key_file: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if !secure {
			return Connection{}, fmt.Errorf("mqtt: TLS files are configured but the broker URL %q is not ssl://, tls://, mqtts:// or wss://", redactURL(broker))
		}
		c.TLS = tc
	}
	return c, nil
}

// clientOptions are paho's options for c with the given last will. The
// session is clean (nothing of an earlier connection is resumed, so no
// command of before a reconnect is replayed by the broker, and none by
// paho either: NoReplayStore), the client
// reconnects on its own with backoff (paho: 1s, doubling up to
// ReconnectMax), and handlers run in order on paho's goroutine (they must
// not block).
func (c Connection) clientOptions(willTopic string, qos byte) *paho.ClientOptions {
	o := paho.NewClientOptions().AddBroker(c.Broker).SetClientID(c.ClientID).
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).SetMaxReconnectInterval(c.ReconnectMax).
		SetKeepAlive(c.KeepAlive).SetPingTimeout(max(c.KeepAlive/2, time.Second)).
		SetConnectTimeout(5*time.Second).SetWriteTimeout(time.Second).
		SetOrderMatters(true).SetResumeSubs(false).SetStore(NoReplayStore()).
		SetWill(willTopic, StatusOffline, qos, true)
	if c.Username != "" {
		o.SetUsername(c.Username)
		o.SetPassword(c.Password)
	}
	if c.TLS != nil {
		o.SetTLSConfig(c.TLS)
	}
	return o
}
