-- What crosses between the parties of vt.game: forfeits, the schema every answer is checked
-- against, transcript entries (large bytes summarized), and the network that carries each
-- request and reply as one line of JSON (docs/api/game.md, "Messages").
local util = require "vt.util"

local M = {}

local json = vt.json

-- Bytes longer than this are kept in transcripts as their digest and size only.
local TRANSCRIPT_INLINE = 4096

-- A transcript entry's form of `value`: strings over TRANSCRIPT_INLINE bytes become
-- {sha256 =, bytes =}, recursively.
local function summarize(value)
  if type(value) == "string" then
    if #value > TRANSCRIPT_INLINE then return {sha256 = vt.store.sha256(value), bytes = #value} end
    return value
  end
  if type(value) ~= "table" or value == json.null then return value end
  local out = {}
  for k, v in pairs(value) do out[k] = summarize(v) end
  return out
end
M.summarize = summarize

-- ---------------------------------------------------------------------------------------
-- Forfeits: an error object {forfeit = party, reason = ...} raised to the caller.

local Forfeit = {}
Forfeit.__index = Forfeit
Forfeit.__tostring = function(f) return string.format("%s forfeits: %s", f.forfeit, f.reason) end
M.is_forfeit = function(e) return getmetatable(e) == Forfeit end

local function forfeit(party, reason)
  error(setmetatable({forfeit = party, reason = reason}, Forfeit), 0)
end
M.forfeit = forfeit

-- ---------------------------------------------------------------------------------------
-- The shape of every answer, checked before the asking party uses it: a malformed answer
-- makes the answering party lose, not the one that asked.

local function is_hex(v) return type(v) == "string" and #v == 64 and v:match("^[0-9a-f]+$") ~= nil end
local function is_int(v) return type(v) == "number" and v >= 0 and v == math.floor(v) end
local function is_array(v, item)
  if type(v) ~= "table" then return false end
  for _, x in ipairs(v) do
    if not item(x) then return false end
  end
  return true
end
local function is_leaf(v)
  return type(v) == "table" and is_int(v.index) and is_hex(v.leaf) and is_array(v.proof, is_hex)
end
local function is_full_leaf(v) return is_leaf(v) and is_hex(v.state_digest) and is_hex(v.log_digest) end
local function is_record(r)
  return type(r) == "table" and type(r.boundary) == "string" and is_int(r.call) and type(r.value) == "string"
end
local function is_steps(v)
  return is_array(v, function(st) return type(st) == "table" and is_int(st.step) and is_array(st.records, is_record) end)
end
local SCHEMAS = {
  commit = {spec = function(v) return type(v) == "string" end, spec_hash = is_hex, n_leaves = is_int, root = is_hex,
            checkpoint_every = is_int, steps = is_int},
  logs = {leaf = is_full_leaf, steps = is_steps},
  leaf = {index = is_int, leaf = is_hex, proof = function(v) return is_array(v, is_hex) end},
  handover = {steps = is_steps},
  weights = {leaf = is_full_leaf, checkpoint = function(v) return type(v) == "string" end},
  audit = {root = is_hex, n_leaves = is_int},
  bisect = {rounds = is_int},
  adjudicate = {outcome = function(v) return type(v) == "string" end},
}
M.is_full_leaf = is_full_leaf

-- The body of a decoded reply, or the forfeit it implies: an error reply, a forfeit passed
-- on from a nested request, a refusal, or a malformed answer.
local check_answer
local function accept_reply(to, type_, reply)
  if reply.error then forfeit(to, "error answering '" .. type_ .. "': " .. tostring(reply.error)) end
  if reply.forfeit then error(setmetatable({forfeit = reply.forfeit.party, reason = reply.forfeit.reason}, Forfeit), 0) end
  if reply.body and reply.body.refused then forfeit(to, "refused to answer '" .. type_ .. "'") end
  check_answer(to, type_, reply.body)
  return reply.body
end
M.accept_reply = accept_reply

function check_answer(to, type_, body)
  local schema = SCHEMAS[type_]
  if schema == nil or (type(body) == "table" and body.refused) then return end
  if type(body) ~= "table" then forfeit(to, "malformed answer to '" .. type_ .. "': not an object") end
  local fields = {}
  for field in pairs(schema) do fields[#fields + 1] = field end
  table.sort(fields)  -- the first bad field in name order, so the message is stable
  for _, field in ipairs(fields) do
    if not schema[field](body[field]) then
      forfeit(to, "malformed answer to '" .. type_ .. "': field '" .. field .. "' is missing or invalid")
    end
  end
end

-- ---------------------------------------------------------------------------------------
-- The network: delivers serialized messages between named parties, keeps the sequence
-- number, enforces deadlines, and turns a refusal, an error or a missed deadline into a
-- forfeit.

local Network = {}
Network.__index = Network

local games_made = 0
local DEFAULT_DEADLINES = {default = 60, audit = 24 * 3600, adjudicate = 24 * 3600, bisect = 3600}

function M.network(options)
  options = util.check_options("vt.game.network", options, {"game", "deadlines"})
  local deadlines = {}
  for k, v in pairs(DEFAULT_DEADLINES) do deadlines[k] = v end
  for k, v in pairs(options.deadlines or {}) do deadlines[k] = v end
  -- A fresh game id by default, so a party's store can hold many games (the auditor keeps
  -- its replay as a run named after the game).
  games_made = games_made + 1
  local game = options.game or string.format("game-%d-%d", os.time(), games_made)
  return setmetatable({game = game, parties = {}, seq = 0, deadlines = deadlines, log = {}}, Network)
end

function Network:add(party)
  if self.parties[party.name] then error("vt.game.network: a party named '" .. party.name .. "' is already in the game", 2) end
  self.parties[party.name] = party
  party.net = {request = function(_, from, to, type_, body) return self:request(from, to, type_, body) end}
  if party.attach then party:attach(self) end
  return party
end

function Network:party(name) return self.parties[name] end

-- One request/reply exchange. The request and the reply cross as JSON text; both are
-- appended to the sender's and the receiver's transcripts (a remote party appends in its own
-- process). Returns the reply body.
function Network:request(from, to, type_, body)
  local sender, receiver = self.parties[from], self.parties[to]
  if receiver == nil then error("vt.game: no party named '" .. tostring(to) .. "'", 2) end
  self.seq = self.seq + 1
  local request = {kind = "request", game = self.game, seq = self.seq, from = from, to = to, type = type_, body = body or {}}
  local text = json.encode(request)
  if sender and sender.record then sender:record(self.game, request) end
  local deadline = self.deadlines[type_] or self.deadlines.default
  local t0 = vt.clock()
  local ok, reply_text, nested = pcall(receiver.deliver, receiver, text, deadline, self)
  local elapsed = vt.clock() - t0 - (nested or 0)
  if not ok then
    if M.is_forfeit(reply_text) then error(reply_text, 0) end
    forfeit(to, "failed to answer '" .. type_ .. "': " .. tostring(reply_text))
  end
  local reply = json.decode(reply_text)
  if sender and sender.record then sender:record(self.game, reply) end
  self.log[#self.log + 1] = {seq = self.seq, from = from, to = to, type = type_, bytes = #text + #reply_text, seconds = elapsed}
  if elapsed > deadline and not reply.error and not reply.forfeit then
    forfeit(to, string.format("missed the deadline of '%s' (%.2f s > %.2f s)", type_, elapsed, deadline))
  end
  return accept_reply(to, type_, reply)
end

return M
