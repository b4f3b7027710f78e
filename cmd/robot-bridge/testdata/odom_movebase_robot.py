#!/usr/bin/python3
"""The least a ROS base robot has: odometry, cmd_vel and move_base.

A stand-in for a third-party robot in `robot-bridge init`'s end-to-end
test, written with rospy and python3-actionlib only:

  publishes  odom      nav_msgs/Odometry        (50 Hz, frame ~frame, default odom)
  serves     move_base move_base_msgs/MoveBase  (actionlib SimpleActionServer)
  listens    cmd_vel   geometry_msgs/Twist      (drives when no goal runs)

and nothing else: no e-stop, no battery, no joint states.

Its log (stdout) is the test's evidence of what reached it. Every goal and
every velocity command is one line, stamped with the wall clock:

  GOAL <time> <x> <y> <theta> <frame_id>
  CMD_VEL <time> <v> <w>
  RESULT <time> <state> <x> <y> <theta>

~x, ~y, ~theta set the starting pose. ~yaw_offset_deg makes the robot end
every goal that many degrees off the requested heading and still report it
SUCCEEDED, as a move_base whose own yaw tolerance is looser than the
bridge's does.
"""

import math
import threading
import time

import actionlib
import rospy
from geometry_msgs.msg import Quaternion, Twist
from move_base_msgs.msg import MoveBaseAction, MoveBaseResult
from nav_msgs.msg import Odometry

V = 0.4  # m/s
W = 1.0  # rad/s
RATE = 50.0


def yaw_of(q):
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def wrap(a):
    return math.atan2(math.sin(a), math.cos(a))


def quat(yaw):
    return Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2))


def log(*fields):
    print(" ".join(str(f) for f in fields), flush=True)


class Robot:
    def __init__(self):
        self.lock = threading.Lock()
        self.x = rospy.get_param("~x", 0.0)
        self.y = rospy.get_param("~y", 0.0)
        self.th = rospy.get_param("~theta", 0.0)
        self.frame = rospy.get_param("~frame", "odom")
        self.v = 0.0
        self.w = 0.0
        self.odom = rospy.Publisher("odom", Odometry, queue_size=10)
        rospy.Subscriber("cmd_vel", Twist, self.on_cmd_vel, queue_size=10)
        self.busy = False
        self.server = actionlib.SimpleActionServer("move_base", MoveBaseAction, self.on_goal, auto_start=False)
        self.server.start()

    def on_cmd_vel(self, msg):
        log("CMD_VEL", "%.6f" % time.time(), "%.4f" % msg.linear.x, "%.4f" % msg.angular.z)
        with self.lock:
            if not self.busy:
                self.v, self.w = msg.linear.x, msg.angular.z

    def on_goal(self, goal):
        p = goal.target_pose.pose
        tx, ty, tth = p.position.x, p.position.y, yaw_of(p.orientation)
        log("GOAL", "%.6f" % time.time(), "%.4f" % tx, "%.4f" % ty, "%.4f" % tth, goal.target_pose.header.frame_id)
        tth = wrap(tth + math.radians(rospy.get_param("~yaw_offset_deg", 0.0)))
        with self.lock:
            self.busy = True
        rate = rospy.Rate(RATE)
        state = "SUCCEEDED"
        # Turn toward the target, drive, turn to the (offset) heading.
        for phase in ("turn", "drive", "face"):
            while not rospy.is_shutdown():
                if self.server.is_preempt_requested():
                    state = "PREEMPTED"
                    break
                with self.lock:
                    dx, dy = tx - self.x, ty - self.y
                    dist = math.hypot(dx, dy)
                    if phase == "turn":
                        err = wrap(math.atan2(dy, dx) - self.th) if dist > 0.01 else 0.0
                    elif phase == "face":
                        err = wrap(tth - self.th)
                    else:
                        err = 0.0
                    if phase == "drive":
                        if dist <= 0.01:
                            self.v = 0.0
                            break
                        self.v, self.w = min(V, max(0.1, 3 * dist)), 0.0
                    else:
                        if abs(err) <= 0.01:
                            self.w = 0.0
                            break
                        self.v, self.w = 0.0, math.copysign(min(W, max(0.3, 3 * abs(err))), err)
                rate.sleep()
            if state != "SUCCEEDED":
                break
        with self.lock:
            self.v = self.w = 0.0
            self.busy = False
            x, y, th = self.x, self.y, self.th
        # Let a state at rest go out before the verdict, as a real base's
        # odometry shows it stopped when move_base reports success.
        time.sleep(3 / RATE)
        log("RESULT", "%.6f" % time.time(), state, "%.4f" % x, "%.4f" % y, "%.4f" % th)
        if state == "SUCCEEDED":
            self.server.set_succeeded(MoveBaseResult(), "Goal reached.")
        else:
            self.server.set_preempted(MoveBaseResult(), "cancelled")

    def run(self):
        rate = rospy.Rate(RATE)
        dt = 1 / RATE
        while not rospy.is_shutdown():
            with self.lock:
                self.x += self.v * math.cos(self.th) * dt
                self.y += self.v * math.sin(self.th) * dt
                self.th = wrap(self.th + self.w * dt)
                o = Odometry()
                o.header.stamp = rospy.Time.now()
                o.header.frame_id = self.frame
                o.child_frame_id = "base_link"
                o.pose.pose.position.x = self.x
                o.pose.pose.position.y = self.y
                o.pose.pose.orientation = quat(self.th)
                o.twist.twist.linear.x = self.v
                o.twist.twist.angular.z = self.w
            self.odom.publish(o)
            try:
                rate.sleep()
            except rospy.ROSInterruptException:
                break


if __name__ == "__main__":
    rospy.init_node("odom_robot")
    r = Robot()
    log("UP", "%.6f" % time.time(), "%.4f" % r.x, "%.4f" % r.y, "%.4f" % r.th)
    r.run()
