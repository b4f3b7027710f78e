// The official MCP TypeScript SDK as an agent host uses it, against a
// running bridge. bridge/mcp_sdk_e2e_test.go starts the bridge, runs this
// script with ROBOT_BRIDGE_MCP_URL and ROBOT_BRIDGE_TOKEN, approves the
// motion when the script says it is waiting, and asserts on the JSON lines
// the script prints (one per step, {"step": ..., ...}). The script checks
// nothing itself beyond what it needs to go on: every assertion is in Go.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { randomUUID } from "node:crypto";

const url = process.env.ROBOT_BRIDGE_MCP_URL;
const token = process.env.ROBOT_BRIDGE_TOKEN;
if (!url || !token) {
  console.error("usage: ROBOT_BRIDGE_MCP_URL=http://127.0.0.1:8080/mcp ROBOT_BRIDGE_TOKEN=... node client.mjs");
  process.exit(2);
}

const out = (step, data = {}) => process.stdout.write(JSON.stringify({ step, ...data }) + "\n");
const envelopeOf = (res) => JSON.parse(res.contents?.[0]?.text ?? res.content?.[0]?.text ?? "null");

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "robot-bridge-sdk-e2e", version: "1.0.0" });
  await client.connect(transport);
  out("initialized", {
    server: client.getServerVersion(),
    instructions: client.getInstructions(),
    capabilities: client.getServerCapabilities(),
    protocol_version: transport.protocolVersion ?? null,
    session: Boolean(transport.sessionId),
  });

  const { tools } = await client.listTools();
  out("tools", {
    tools: tools.map((t) => ({
      name: t.name,
      title: t.title,
      annotations: t.annotations,
      properties: Object.keys(t.inputSchema?.properties ?? {}),
    })),
  });

  const { resources } = await client.listResources();
  const { resourceTemplates } = await client.listResourceTemplates();
  out("resources", { resources, templates: resourceTemplates });

  // Read the robot, then subscribe to it. Every update is recorded with
  // the phase of the motion it arrived in.
  let phase = "before";
  const updates = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updates.push({ uri: n.params.uri, phase });
  });
  const before = await client.readResource({ uri: "robot://state" });
  out("read_state", { mime_type: before.contents[0].mimeType, uri: before.contents[0].uri, envelope: envelopeOf(before) });
  await client.subscribeResource({ uri: "robot://state" });
  out("subscribed", { uri: "robot://state" });

  const state = await client.callTool({ name: "get_robot_state", arguments: {} });
  out("state_tool", { is_error: state.isError ?? false, structured: state.structuredContent, envelope: envelopeOf(state) });

  // A motion that needs an operator's approval, waited for with progress.
  const progress = [];
  const motion = await client.callTool(
    {
      name: "move_base_to",
      arguments: { x: 0.5, y: 0.0, wait_ms: 45000, idempotency_key: randomUUID() },
    },
    undefined,
    {
      timeout: 90000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => {
        progress.push(p);
        if (progress.length === 1) {
          out("waiting_for_approval", { progress: p });
        }
        if (p.progress > 0 && phase === "before") {
          phase = "moving";
        }
      },
    },
  );
  phase = "after";
  const env = envelopeOf(motion);
  out("motion", {
    is_error: motion.isError ?? false,
    structured: motion.structuredContent,
    envelope: env,
    progress,
    state_updates_while_moving: updates.filter((u) => u.uri === "robot://state" && u.phase === "moving").length,
    updates,
  });

  const after = await client.readResource({ uri: "robot://state" });
  out("read_state_after", { envelope: envelopeOf(after) });
  if (env?.task?.id) {
    const task = await client.readResource({ uri: `robot://tasks/${env.task.id}` });
    out("task_resource", { uri: task.contents[0].uri, envelope: envelopeOf(task) });
  }
  try {
    await client.readResource({ uri: "robot://tasks/no-such-task" });
    out("unknown_task", { code: null });
  } catch (e) {
    out("unknown_task", { code: e.code ?? null, message: String(e.message) });
  }

  // A call that fails: inside the room but outside the workspace, refused
  // before an operator is ever asked.
  const failing = await client.callTool({ name: "move_base_to", arguments: { x: 4.8, y: 0.0 } });
  out("failing_call", { is_error: failing.isError ?? false, structured: failing.structuredContent, envelope: envelopeOf(failing) });

  await client.close();
  out("done");
}

main().catch((e) => {
  out("error", { message: String(e?.message ?? e), stack: String(e?.stack ?? "") });
  process.exit(1);
});
