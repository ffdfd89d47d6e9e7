'use strict';
// sandgate's library for sandboxed code (JavaScript and TypeScript):
//
//   const { tools } = require('sandgate');            // or: import { tools } from 'sandgate';
//   const forecast = await tools.weather.get({ city: 'Oslo' });   // calls the tool "weather.get"
//
// The tools are the ones the operator offers this tenant; the sandbox has no network: each call goes to the worker
// over the run's own channel, and the worker makes it. A failed call rejects with a ToolError.
const net = require('node:net');

class ToolError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ToolError';
  }
}

let socket;
let buffered = '';
const waiting = [];

function connection() {
  if (socket) return socket;
  const fd = Number(process.env.SANDGATE_TOOLS_FD);
  if (!Number.isInteger(fd) || process.env.SANDGATE_TOOLS_FD === undefined) {
    throw new ToolError('no tools in this run: the operator offers this tenant none');
  }
  socket = new net.Socket({ fd, readable: true, writable: true });
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      waiting.shift()?.(line);
    }
  });
  socket.on('close', () => {
    for (const w of waiting.splice(0)) w(null);
  });
  socket.unref();
  return socket;
}

/** Calls the tool `name` with the arguments object `args`; resolves with its result. */
function call(name, args = {}) {
  return new Promise((resolve, reject) => {
    let s;
    try {
      s = connection();
    } catch (err) {
      return reject(err);
    }
    // The program stays alive while a call is out, and only then.
    s.ref();
    waiting.push((line) => {
      if (waiting.length === 0) s.unref();
      if (line === null) return reject(new ToolError('the tool channel closed'));
      const answer = JSON.parse(line);
      if (answer.ok) resolve(answer.result);
      else reject(new ToolError(answer.error || 'the call failed'));
    });
    s.write(`${JSON.stringify({ name, args })}\n`);
  });
}

function tool(name) {
  return new Proxy(function () {}, {
    get: (_, part) => (typeof part !== 'string' || part === 'then' ? undefined : tool(`${name}.${part}`)),
    apply: (_, __, [args]) => call(name, args),
  });
}

const tools = new Proxy({}, { get: (_, name) => (typeof name !== 'string' || name === 'then' ? undefined : tool(name)) });

module.exports = { tools, call, ToolError };
