package grpcapi

import (
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/robot-bridge/robot-bridge/approval"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// A fleet bridge's operator names the robot an RPC is for. The rules are
// the HTTP routes': an e-stop without a robot stops every robot (its safe
// default), a reset or a fault clear needs one when the bridge serves
// more than one robot ("*" for every robot, said explicitly) because
// letting a robot move again is never implied, and a listing filters by
// one robot or shows them all.

// robotIDField is the request field the refusals name.
const robotIDField = "robot_id"

// checkRobotFilter refuses a listing's robot_id that names no robot of
// the bridge; empty is every robot.
func (s *OperatorService) checkRobotFilter(id string) error {
	if id == "" {
		return nil
	}
	robots := s.conf.Approvals.Robots()
	if slices.Contains(robots, id) {
		return nil
	}
	return robotRefusal(fmt.Sprintf("robot_id: unknown robot %q (robots: %s)", id, approval.JoinRobotIDs(robots)),
		"name one of the robots, or leave robot_id empty for every robot")
}

// latchTarget resolves the robot_id of a reset or a clear (what says
// which) into what Latches gets: a robot id, or AllRobots. Empty is the
// one robot of a one-robot bridge and refused with several.
func (s *OperatorService) latchTarget(id, what string) (string, error) {
	id = strings.TrimSpace(id)
	robots := s.conf.Approvals.Robots()
	switch {
	case id == AllRobots:
		return AllRobots, nil
	case id == "" && len(robots) == 1:
		return robots[0], nil
	case id == "":
		return "", robotRefusal(fmt.Sprintf("robot_id: required for the %s: this bridge serves %d robots, so say which one (robots: %s)",
			what, len(robots), approval.JoinRobotIDs(robots)),
			fmt.Sprintf("name one robot by its robot_id, or %q for every robot", AllRobots))
	case slices.Contains(robots, id):
		return id, nil
	}
	return "", robotRefusal(fmt.Sprintf("robot_id: unknown robot %q (robots: %s)", id, approval.JoinRobotIDs(robots)),
		fmt.Sprintf("name one robot by its robot_id, or %q for every robot", AllRobots))
}

// robotRefusal is INVALID_ARGUMENT (INVALID_PARAMS) for a bad robot_id,
// its field in the details: nothing changed.
func robotRefusal(msg, suggestion string) *connect.Error {
	te := toolerr.New(toolerr.InvalidParams, "%s", msg).With("field", robotIDField)
	te.Suggestion = suggestion
	return refusalOf(connect.CodeInvalidArgument, te)
}

// fleetRobotID is the robot_id of a one-robot answer: set only when the
// bridge serves several robots, as the HTTP routes answer, so a one-robot
// bridge's answers stay as they were.
func (s *OperatorService) fleetRobotID(r LatchResult) string {
	if len(s.conf.Approvals.Robots()) > 1 {
		return r.Status.RobotID
	}
	return ""
}

// latchSummary is the part of an answer for several robots that the three
// responses share.
type latchSummary struct {
	text, warning string
	robots        []*robotbridgev1.RobotLatch
	// notRecorded is the first robot's change in force but not on the
	// disk, if any.
	notRecorded error
}

// manyLatches summarises a change of several robots: each robot's latch
// (fill sets the one the RPC changed) or refusal, the changed ones first,
// and a sentence over all of them in the HTTP routes' words.
func manyLatches(results []LatchResult, refused []LatchRefusal, fill func(LatchResult, *robotbridgev1.RobotLatch)) latchSummary {
	var m latchSummary
	var warned []string
	for _, r := range results {
		l := &robotbridgev1.RobotLatch{RobotId: r.Status.RobotID, Text: r.Text, Warning: r.StopWarning}
		fill(r, l)
		if r.StopWarning != "" {
			warned = append(warned, r.Status.RobotID)
		}
		if r.NotRecorded != nil && m.notRecorded == nil {
			m.notRecorded = r.NotRecorded
		}
		m.robots = append(m.robots, l)
	}
	for _, f := range refused {
		te := refusalError(f.Err)
		m.robots = append(m.robots, &robotbridgev1.RobotLatch{RobotId: f.RobotID, Error: errorToProto(toolapi.ErrorBodyOf(te))})
	}
	total := len(results) + len(refused)
	m.text = fmt.Sprintf("%d of %d robots changed.", len(results), total)
	if len(refused) > 0 {
		m.text += fmt.Sprintf(" %d refused; each refusal says why, and those robots are as they were.", len(refused))
	}
	if len(warned) > 0 {
		m.warning = fmt.Sprintf("The stop command could not be delivered to %d robots (%s); their e-stop is latched all the same.",
			len(warned), approval.JoinRobotIDs(warned))
		m.text += " " + m.warning
	}
	return m
}

// refusalError is a robot's refusal as a *toolerr.Error; a refusal that
// came without one is a bug of the caller, said as INTERNAL.
func refusalError(err error) *toolerr.Error {
	if err == nil {
		return toolerr.New(toolerr.Internal, "the robot refused without saying why")
	}
	return toolerr.As(err)
}

// latchAnswer answers a reset or a clear (what names it in a refusal):
// one robot keeps the one-robot answer (one fills out, a refusal is that
// robot's own error), several answer per robot (each fills a robot's
// latch, many the summary). A change in force but not recorded is
// UNAVAILABLE and a refusal of any robot FAILED_PRECONDITION, each with
// out as a detail: never OK when something did not happen.
func (s *OperatorService) latchAnswer(procedure, what string, results []LatchResult, refused []LatchRefusal,
	one func(LatchResult), each func(LatchResult, *robotbridgev1.RobotLatch), many func(latchSummary), out proto.Message,
) error {
	switch len(results) + len(refused) {
	case 0:
		return s.noLatchAnswer(procedure)
	case 1:
		if len(refused) == 1 {
			return latchRefused(refusalError(refused[0].Err))
		}
		one(results[0])
		if results[0].NotRecorded != nil {
			return notRecorded(results[0].NotRecorded, out)
		}
		return nil
	}
	m := manyLatches(results, refused, each)
	many(m)
	switch {
	case m.notRecorded != nil:
		return notRecorded(m.notRecorded, out)
	case len(refused) > 0:
		te := toolerr.New(toolerr.Conflict, "%d of %d robots refused the %s; each refusal says why, and those robots are as they were",
			len(refused), len(results)+len(refused), what)
		return refusalOf(connect.CodeFailedPrecondition, te, out)
	}
	return nil
}

// noLatchAnswer is the answer when Latches reported no robot at all: a
// bug of the bridge, said as such rather than as an empty success.
func (s *OperatorService) noLatchAnswer(procedure string) error {
	s.log.Error("latch change reached no robot", "procedure", procedure)
	return refusal(connect.CodeInternal, toolerr.Internal, "the change reached no robot; check GET /v1/safety and try again")
}
