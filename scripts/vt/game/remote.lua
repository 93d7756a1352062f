-- Remote parties of vt.game: a trainer, auditor or judge in another vtrun process (any
-- profile), speaking the game's JSON lines on its stdin/stdout.
-- vt.game.remote{role=, profile=, options=} starts one; vt.game.serve() is the main loop of
-- the other process.
local auditor = require "vt.game.auditor"
local judge = require "vt.game.judge"
local trainer = require "vt.game.trainer"
local util = require "vt.util"
local wire = require "vt.game.wire"

local M = {}

local json = vt.json

local Remote = {}
Remote.__index = Remote

-- Half of vt.process's 1 GiB line: the most a party in its own process is handed in one answer.
M.MAX_REPLY = 512 * 1024 * 1024

function M.remote(options)
  options = util.check_options("vt.game.remote", options, {"role", "name", "profile", "options", "executable",
                                                            "max_reply"})
  -- The largest answer this party may be handed: its line to and from the process is at most
  -- 1 GiB (vt.process), and an auditor passes a bad answer on as evidence in its own reply.
  local max_reply = options.max_reply or M.MAX_REPLY
  if not (type(max_reply) == "number" and max_reply >= 1 and max_reply <= M.MAX_REPLY and
          max_reply == math.floor(max_reply)) then
    error("vt.game.remote: max_reply must be an integer in [1, " .. M.MAX_REPLY .. "], got " .. tostring(max_reply), 2)
  end
  local role = options.role
  if role ~= "trainer" and role ~= "auditor" and role ~= "judge" then
    error("vt.game.remote: role must be \"trainer\", \"auditor\" or \"judge\", got " .. tostring(role), 2)
  end
  local argv = {options.executable or vt.executable()}
  if options.profile then argv[#argv + 1] = "--profile" argv[#argv + 1] = options.profile end
  argv[#argv + 1] = "-e"
  argv[#argv + 1] = "require('vt.game').serve()"
  local child = vt.process.spawn(argv)
  local self = setmetatable({kind = role, name = options.name or role, child = child, max_reply = max_reply}, Remote)
  local config = {role = role, name = self.name, options = options.options or {}}
  if options.profile then config.options.profile = config.options.profile or options.profile end
  child:send(json.encode(config))
  local line, why = child:receive(120)
  if line == nil then error("vt.game.remote: the " .. role .. " process did not start (" .. why .. ")", 2) end
  local hello = json.decode(line)
  if hello.error then error("vt.game.remote: the " .. role .. " process failed: " .. hello.error, 2) end
  self.pid = child:pid()
  return self
end

-- Sends the request text and waits for its reply, routing the party's own requests (to other
-- parties) through the network meanwhile, as this party (whatever sender a line names).
-- Returns the reply text. The wait for the reply does not count the nested requests' time.
function Remote:deliver(text, deadline, net, seq)
  self.child:send(text)
  local nested = 0
  local start = vt.clock()
  while true do
    local left = deadline - (vt.clock() - start - nested) + 1
    local line, why = self.child:receive(math.max(left, 0.01))
    if line == nil then
      if why == "timeout" then wire.forfeit(self.name, "missed the deadline (no answer in " .. deadline .. " s)") end
      wire.forfeit(self.name, "its process ended without answering")
    end
    local okdecode, message = pcall(json.decode, line)
    if not okdecode or type(message) ~= "table" then wire.forfeit(self.name, "wrote a line that is not a JSON object") end
    if message.kind == "reply" then
      if seq ~= nil and message.seq ~= seq then
        wire.forfeit(self.name, "answered request " .. tostring(message.seq) .. " while request " .. seq .. " was asked")
      end
      return line
    end
    if message.kind ~= "request" then wire.forfeit(self.name, "wrote a line that is neither a request nor a reply") end
    -- A request of the remote party to another party.
    local t = vt.clock()
    local ok, body, attested = pcall(net.request, net, self.name, message.to, message.type, message.body)
    nested = nested + (vt.clock() - t)
    local reply = {kind = "reply", seq = message.seq, to = self.name, attested = attested}
    if ok then
      reply.body = body
    elseif wire.is_forfeit(body) then
      -- The network has raised this forfeit itself; it honours it when the party passes it on.
      reply.forfeit = {party = body.forfeit, reason = body.reason}
    else
      reply.error = tostring(body)
    end
    self.child:send(json.encode(reply))
  end
end

function Remote:close()
  self.child:close_input()
  return self.child:wait(30)
end

-- The remote side: read the configuration, build the party, answer requests until EOF.
function M.serve()
  io.stdout:setvbuf("full")
  local function send(t)
    io.stdout:write(json.encode(t), "\n")
    io.stdout:flush()
  end
  local config = json.decode(io.stdin:read("*l"))
  local o = config.options
  local ok, party = pcall(function()
    local store = vt.store.open(o.store)
    if config.role == "trainer" then
      return trainer.new{store = store, run = o.run, name = config.name, behaviour = o.behaviour}
    elseif config.role == "auditor" then
      return auditor.new{store = store, data = o.data, profile = o.profile, name = config.name, behaviour = o.behaviour,
                         init = o.init}
    end
    return judge.new{store = store, data = o.data, profile = o.profile, name = config.name, init = o.init}
  end)
  if not ok then send{error = tostring(party)} return end
  -- Requests this party makes go out on stdout; their replies come back on stdin.
  local seq = 0
  party.net = {request = function(_, from, to, type_, body)
    seq = seq + 1
    local request = {kind = "request", game = party.current_game, seq = seq, from = from, to = to, type = type_, body = body or {}}
    party:record(party.current_game or "game", request)
    send(request)
    local line = io.stdin:read("*l")
    if line == nil then error("the game's network closed while " .. to .. " was asked '" .. type_ .. "'") end
    local reply = json.decode(line)
    if reply.kind ~= "reply" or reply.seq ~= seq then
      error("the network answered request " .. tostring(reply.seq) .. " while request " .. seq .. " was waiting")
    end
    party:record(party.current_game or "game", reply)
    -- The network's sequence number of the exchange: what its attestation of the reply is kept by.
    return wire.accept_reply(to, type_, reply), reply.attested
  end}
  send{hello = config.role, pid = 0}
  for line in io.stdin:lines() do
    local request = json.decode(line)
    party.current_game = request.game
    io.stdout:write(party:deliver(line), "\n")
    io.stdout:flush()
  end
end

return M
