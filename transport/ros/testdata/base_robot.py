#!/usr/bin/python3
"""A base-only ROS robot that is not the bundled simulator.

It stands in for a third-party robot in robot-bridge's integration tests: it
is written with rospy and python3-actionlib only, and speaks nothing but
standard interfaces that Debian ships message classes for:

  publishes  odom           nav_msgs/Odometry       (50 Hz, pose in the map frame)
             joint_states   sensor_msgs/JointState  (the two wheel joints)
             battery_state  sensor_msgs/BatteryState (1 Hz)
             estop          std_msgs/Bool           (latched)
  serves     move_base      move_base_msgs/MoveBase (actionlib ActionServer)
  listens    cmd_vel        geometry_msgs/Twist     (drives when no goal runs)

so the bridge reaches it through a hw-config alone (ros-base-only.yaml).

How it answers the next goal is the private parameter ~on_goal, read when
the goal arrives, so a test decides without the bridge knowing:

  succeed  drive there (turn, drive, turn) and SUCCEED (the default)
  abort    start driving, then ABORT after ~abort_after seconds, stopped,
           as move_base does when its planner gives up
  reject   REJECT the goal at once
  silent   accept the goal, then hang for ~silence seconds: no odometry,
           no action status, nothing (a wedged robot process); the wheels
           stop, as a real base controller does without commands. When it
           comes back the goal is gone (ABORTED, or PREEMPTED if a cancel
           arrived meanwhile).

~x, ~y, ~theta set the starting pose. The robot stops by itself if a goal
runs longer than ~goal_timeout seconds.
"""

import math
import threading

import actionlib
import rospy
from actionlib_msgs.msg import GoalStatus
from geometry_msgs.msg import Quaternion, Twist
from move_base_msgs.msg import MoveBaseAction, MoveBaseFeedback, MoveBaseResult
from nav_msgs.msg import Odometry
from sensor_msgs.msg import BatteryState, JointState
from std_msgs.msg import Bool

MAX_V = 0.5  # m/s
MAX_W = 1.2  # rad/s
ACC_V = 1.0  # m/s^2
ACC_W = 3.0  # rad/s^2
POS_TOL = 0.02  # m, tighter than the bridge's goal_tolerance
YAW_TOL = 0.02  # rad
WHEEL_R = 0.1  # m
TRACK = 0.4  # m


def yaw_of(q):
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def wrap(a):
    return math.atan2(math.sin(a), math.cos(a))


def clamp(x, lo, hi):
    return max(lo, min(hi, x))


class FreezableServer(actionlib.ActionServer):
    """An ActionServer whose status timer can be silenced, as when the
    robot's process hangs."""

    frozen = False

    def publish_status(self):
        if self.frozen:
            return
        actionlib.ActionServer.publish_status(self)


class BaseRobot:
    def __init__(self):
        self.lock = threading.RLock()
        self.x = rospy.get_param("~x", 0.0)
        self.y = rospy.get_param("~y", 0.0)
        self.th = rospy.get_param("~theta", 0.0)
        self.v = 0.0
        self.w = 0.0
        self.wheels = [0.0, 0.0]
        self.goal = None  # (gh, tx, ty, tth, mode, started)
        self.frozen_until = None
        self.silent_gh = None
        self.cancel_seen = False

        self.odom_pub = rospy.Publisher("odom", Odometry, queue_size=10)
        self.js_pub = rospy.Publisher("joint_states", JointState, queue_size=10)
        self.bat_pub = rospy.Publisher("battery_state", BatteryState, queue_size=1)
        self.estop_pub = rospy.Publisher("estop", Bool, queue_size=1, latch=True)
        self.estop_pub.publish(Bool(data=False))
        rospy.Subscriber("cmd_vel", Twist, self.on_cmd_vel, queue_size=10)
        self.server = FreezableServer("move_base", MoveBaseAction, self.on_goal, self.on_cancel, auto_start=False)
        self.server.start()

    # --- action server callbacks (rospy threads) ---------------------------

    def on_goal(self, gh):
        mode = rospy.get_param("~on_goal", "succeed")
        g = gh.get_goal().target_pose.pose
        tx, ty, tth = g.position.x, g.position.y, yaw_of(g.orientation)
        if not all(math.isfinite(v) for v in (tx, ty, tth)):
            gh.set_rejected(MoveBaseResult(), "target is not finite")
            return
        if mode == "reject":
            gh.set_rejected(MoveBaseResult(), "goal rejected: not allowed in this area")
            return
        with self.lock:
            if self.goal is not None:
                self.goal[0].set_canceled(MoveBaseResult(), "preempted by a newer goal")
            gh.set_accepted("driving")
            self.goal = (gh, tx, ty, tth, mode, rospy.get_time())
            if mode == "silent":
                self.silent_gh = gh
                self.cancel_seen = False
                self.frozen_until = rospy.get_time() + rospy.get_param("~silence", 1.5)
                self.server.frozen = True
        rospy.loginfo("goal %s to (%.2f, %.2f, %.2f): %s", gh.get_goal_id().id, tx, ty, tth, mode)

    def on_cancel(self, gh):
        with self.lock:
            if self.frozen_until is not None:
                # A hung process does not act on it; it remembers it.
                self.cancel_seen = True
                return
            if self.goal is not None and self.goal[0] == gh:
                self.goal = None
                self.v = self.w = 0.0
            gh.set_canceled(MoveBaseResult(), "cancelled")

    def on_cmd_vel(self, msg):
        with self.lock:
            if self.frozen_until is not None:
                return
            # While a goal runs, the planner owns the wheels (a cancel
            # stops it); otherwise cmd_vel drives, like a teleop mux.
            if self.goal is None:
                self.v = clamp(msg.linear.x, -MAX_V, MAX_V)
                self.w = clamp(msg.angular.z, -MAX_W, MAX_W)

    # --- the control loop ----------------------------------------------------

    def step(self, dt, now):
        with self.lock:
            if self.frozen_until is not None:
                # The wheels stop: no commands reach the motors.
                self.v = self.w = 0.0
                if now < self.frozen_until:
                    return False
                self.frozen_until = None
                self.server.frozen = False
                gh = self.silent_gh
                self.silent_gh = None
                if self.goal is not None and self.goal[0] == gh:
                    self.goal = None
                    if self.cancel_seen:
                        gh.set_canceled(MoveBaseResult(), "cancelled while the robot was not responding")
                    else:
                        gh.set_aborted(MoveBaseResult(), "the robot stopped responding")
                rospy.loginfo("responding again")
            v_cmd, w_cmd = 0.0, 0.0
            if self.goal is not None:
                gh, tx, ty, tth, mode, started = self.goal
                if mode == "abort" and now - started > rospy.get_param("~abort_after", 0.4):
                    self.goal = None
                    self.v = self.w = 0.0
                    gh.set_aborted(MoveBaseResult(), "no valid plan: the path is blocked")
                    return True
                if now - started > rospy.get_param("~goal_timeout", 60.0):
                    self.goal = None
                    gh.set_aborted(MoveBaseResult(), "goal timed out")
                else:
                    v_cmd, w_cmd, done = self.control(tx, ty, tth)
                    if done and abs(self.v) < 1e-3 and abs(self.w) < 1e-3:
                        self.goal = None
                        gh.set_succeeded(MoveBaseResult(), "goal reached")
                    elif int(now * 10) != int((now - dt) * 10):
                        fb = MoveBaseFeedback()
                        fb.base_position.header.frame_id = "map"
                        fb.base_position.pose.position.x = self.x
                        fb.base_position.pose.position.y = self.y
                        fb.base_position.pose.orientation = quat(self.th)
                        gh.publish_feedback(fb)
            else:
                v_cmd, w_cmd = self.v, self.w
            # Acceleration limits, then integrate.
            self.v += clamp(v_cmd - self.v, -ACC_V * dt, ACC_V * dt)
            self.w += clamp(w_cmd - self.w, -ACC_W * dt, ACC_W * dt)
            if abs(self.v) < 1e-4:
                self.v = 0.0
            if abs(self.w) < 1e-4:
                self.w = 0.0
            self.x += self.v * math.cos(self.th) * dt
            self.y += self.v * math.sin(self.th) * dt
            self.th = wrap(self.th + self.w * dt)
            self.wheels[0] += (self.v - self.w * TRACK / 2) / WHEEL_R * dt
            self.wheels[1] += (self.v + self.w * TRACK / 2) / WHEEL_R * dt
            return True

    def control(self, tx, ty, tth):
        dx, dy = tx - self.x, ty - self.y
        dist = math.hypot(dx, dy)
        if dist > POS_TOL:
            he = wrap(math.atan2(dy, dx) - self.th)
            if abs(he) > 0.3:
                return 0.0, clamp(2.5 * he, -MAX_W, MAX_W), False
            v = min(MAX_V, 1.2 * dist, math.sqrt(2 * 0.8 * ACC_V * dist))
            return v, clamp(2.5 * he, -MAX_W, MAX_W), False
        e = wrap(tth - self.th)
        if abs(e) > YAW_TOL:
            w = clamp(2.5 * e, -MAX_W, MAX_W)
            if abs(w) < 0.1:
                w = math.copysign(0.1, e)
            return 0.0, w, False
        return 0.0, 0.0, True

    def publish(self, stamp):
        with self.lock:
            o = Odometry()
            o.header.stamp = stamp
            o.header.frame_id = "map"
            o.child_frame_id = "base_link"
            o.pose.pose.position.x = self.x
            o.pose.pose.position.y = self.y
            o.pose.pose.orientation = quat(self.th)
            o.twist.twist.linear.x = self.v
            o.twist.twist.angular.z = self.w
            js = JointState()
            js.header.stamp = stamp
            js.name = ["wheel_left_joint", "wheel_right_joint"]
            js.position = list(self.wheels)
            js.velocity = [(self.v - self.w * TRACK / 2) / WHEEL_R, (self.v + self.w * TRACK / 2) / WHEEL_R]
        self.odom_pub.publish(o)
        self.js_pub.publish(js)

    def run(self):
        rate = rospy.Rate(rospy.get_param("~rate", 50.0))
        last = rospy.get_time()
        n = 0
        while not rospy.is_shutdown():
            now = rospy.get_time()
            if self.step(min(now - last, 0.1), now):
                self.publish(rospy.Time.now())
                if n % 50 == 0:
                    self.bat_pub.publish(BatteryState(voltage=24.5, percentage=0.8, present=True,
                                                      power_supply_status=BatteryState.POWER_SUPPLY_STATUS_DISCHARGING))
                n += 1
            last = now
            try:
                rate.sleep()
            except rospy.ROSInterruptException:
                break


def quat(yaw):
    return Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2))


if __name__ == "__main__":
    rospy.init_node("base_robot")
    robot = BaseRobot()
    rospy.loginfo("base robot up at (%.2f, %.2f, %.2f)", robot.x, robot.y, robot.th)
    robot.run()
