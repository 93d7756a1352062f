-- What crosses between the parties of vt.game: forfeits, the schema every answer is checked
-- against, transcript entries (large bytes summarized), and the network that carries each
-- request and reply as one line of JSON (docs/api/game.md, "Messages").
--
-- The network is the game's referee for everything below the protocol's meaning: who may ask
-- whom what, whether a question is one the asked party must answer, deadlines, and which
-- party failed. No party's word is taken for another's failure: a forfeit is honoured only
-- when the network raised it itself, and the network attests every reply it carried (a
-- digest by sequence number), so a party can prove what another one answered it.
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

-- Integers a double holds exactly (the bindings refuse larger indices).
local MAX_INT = 2 ^ 53
local function is_hex(v) return type(v) == "string" and #v == 64 and v:match("^[0-9a-f]+$") ~= nil end
local function is_int(v) return type(v) == "number" and v >= 0 and v == math.floor(v) and v <= MAX_INT end
M.is_int = is_int
M.is_hex = is_hex
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
local function is_string(v) return type(v) == "string" end
local SCHEMAS = {
  commit = {spec = is_string, spec_hash = is_hex, n_leaves = is_int, root = is_hex, checkpoint_every = is_int, steps = is_int},
  logs = {leaf = is_full_leaf, steps = is_steps},
  -- (What a leaf answer must also carry, its digests and for bisection its prefix root and
  -- consistency proof, the asking party checks: commitment.check_leaf_answer.)
  leaf = {index = is_int, leaf = is_hex, proof = function(v) return is_array(v, is_hex) end},
  handover = {steps = is_steps, checkpoint = function(v) return v == nil or type(v) == "string" end},
  weights = {leaf = is_full_leaf, checkpoint = is_string},
  audit = {root = is_hex, n_leaves = is_int},
  bisect = {rounds = is_int},
  adjudicate = {outcome = is_string},
}
M.is_full_leaf = is_full_leaf

-- Who may ask whom what, by the parties' kinds (PROTOCOL.md's rounds): a request outside
-- this table is the sender's fault, whatever it asks. (A trainer asks nothing: it answers.)
local ROUTES = {
  client = {trainer = {commit = true, weights = true}, auditor = {audit = true, bisect = true},
            judge = {adjudicate = true}},
  auditor = {trainer = {logs = true, leaf = true}},
  judge = {trainer = {leaf = true, handover = true}, auditor = {leaf = true}},
}

-- The questions a party must answer, once the commitment has fixed the number of leaves:
-- an index outside the run is the asker's fault, not a failure of the asked party.
local function check_question(type_, body, n_leaves)
  if type(body) ~= "table" then return "the request's body is not an object" end
  local field, low = nil, 0
  if type_ == "logs" then field, low = "leaf", 1
  elseif type_ == "leaf" then field = "index"
  elseif type_ == "handover" then field = "leaf" end
  if field == nil then return nil end
  local v = body[field]
  if not is_int(v) then return "field '" .. field .. "' is not an integer >= 0" end
  if n_leaves == nil then return "no commitment fixes the run's leaves yet" end
  if v < low or v >= n_leaves then
    return string.format("%s %d is outside the run (valid: %d..%d)", field, v, low, n_leaves - 1)
  end
  return nil
end

-- The body of a decoded reply, or the forfeit it implies: an error reply, a refusal, or a
-- malformed answer. (A forfeit passed on in a reply is the network's to judge: Network:request.)
local check_answer
local function accept_reply(to, type_, reply)
  if reply.error then forfeit(to, "error answering '" .. type_ .. "': " .. tostring(reply.error)) end
  if reply.forfeit then
    local f = type(reply.forfeit) == "table" and reply.forfeit or {}
    error(setmetatable({forfeit = tostring(f.party), reason = tostring(f.reason)}, Forfeit), 0)
  end
  if reply.body and type(reply.body) == "table" and reply.body.refused then forfeit(to, "refused to answer '" .. type_ .. "'") end
  check_answer(to, type_, reply.body)
  return reply.body
end
M.accept_reply = accept_reply

-- How deep an answer may nest (a trainer's logs go five levels down: steps, a step, its
-- records, a record). The asking party puts a trainer's answer into its own replies (the
-- auditor's evidence, a few levels deeper), the client those into its verdict, and vt.json
-- carries at most 200 levels: an answer nested deeper would make the honest party that
-- passes it on fail instead of the one that sent it.
local MAX_ANSWER_DEPTH = {audit = 32, bisect = 32, adjudicate = 32, default = 12}
local function deeper_than(v, limit)
  if type(v) ~= "table" then return false end
  if limit <= 0 then return true end
  for _, x in pairs(v) do
    if deeper_than(x, limit - 1) then return true end
  end
  return false
end

function check_answer(to, type_, body)
  local depth = MAX_ANSWER_DEPTH[type_] or MAX_ANSWER_DEPTH.default
  if deeper_than(body, depth) then
    forfeit(to, "malformed answer to '" .. type_ .. "': nested deeper than " .. depth .. " levels")
  end
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

-- The digest the network attests a reply body by: SHA-256 of its canonical JSON (vt.json
-- writes object keys sorted, so a body decoded and encoded again gives the same text).
function M.body_digest(body)
  return vt.store.sha256(json.encode(body == nil and json.null or body))
end

-- ---------------------------------------------------------------------------------------
-- The network: delivers serialized messages between named parties, keeps the sequence
-- number, enforces routes, questions and deadlines, and turns a refusal, an error or a
-- missed deadline into a forfeit.

local Network = {}
Network.__index = Network

local games_made = 0
local DEFAULT_DEADLINES = {default = 60, audit = 24 * 3600, adjudicate = 24 * 3600, bisect = 3600}

-- Requests one party may make while it answers one request: an audit asks for every leaf's
-- logs, bisection for ceil(log2 n) leaves, the judge for four answers. More is a party
-- stalling the game with questions (whose time is not counted against its own deadline).
local function nested_limit(n_leaves) return 2 * (n_leaves or 0) + 64 end

function M.network(options)
  options = util.check_options("vt.game.network", options, {"game", "deadlines"})
  local deadlines = {}
  for k, v in pairs(DEFAULT_DEADLINES) do deadlines[k] = v end
  for k, v in pairs(options.deadlines or {}) do deadlines[k] = v end
  -- A fresh game id by default, so a party's store can hold many games (the auditor keeps
  -- its replay as a run named after the game).
  games_made = games_made + 1
  local game = options.game or string.format("game-%d-%d", os.time(), games_made)
  return setmetatable({game = game, parties = {}, seq = 0, deadlines = deadlines, log = {}, raised = {}, replies = {},
                       frames = {}, busy = {}}, Network)
end

function Network:add(party)
  if self.parties[party.name] then error("vt.game.network: a party named '" .. party.name .. "' is already in the game", 2) end
  self.parties[party.name] = party
  -- A party sends as itself: the sender a request names is the party the network gave this
  -- handle to, whatever the caller passes.
  local name = party.name
  party.net = {request = function(_, _, to, type_, body) return self:request(name, to, type_, body) end}
  if party.attach then party:attach(self) end
  return party
end

function Network:party(name) return self.parties[name] end

-- The network's record of the reply to request `seq`: {from, to, type, request, digest}
-- (`request` is the request's body for the small question types), or nil.
function Network:attested(seq) return self.replies[seq] end

-- Raises a forfeit the network itself has seen, and remembers it: only such forfeits are
-- honoured when a reply passes one on.
function Network:raise(party, reason)
  self.raised[#self.raised + 1] = {party = party, reason = reason}
  forfeit(party, reason)
end

-- A forfeit that arrived from below an exchange that began when `mark` forfeits had been
-- raised: the network's own record of it, or the forfeit of `to`, who passed on a claim the
-- network never made.
function Network:confirm_forfeit(f, mark, to, type_)
  for i = #self.raised, mark + 1, -1 do
    local r = self.raised[i]
    if r.party == f.forfeit then error(setmetatable({forfeit = r.party, reason = r.reason}, Forfeit), 0) end
  end
  self:raise(to, string.format("its answer to '%s' claims that '%s' forfeited, which the network never saw",
                               type_, tostring(f.forfeit)))
end

-- One request/reply exchange. The request and the reply cross as JSON text; both are
-- appended to the sender's and the receiver's transcripts (a remote party appends in its own
-- process). Returns the reply body and the request's sequence number (the key of the
-- network's attestation of the reply).
function Network:request(from, to, type_, body)
  local parent = self.frames[#self.frames]
  -- Inside an exchange only the party answering it runs: a request in another's name (made
  -- with the network a party was handed) is that party's own, and its forfeit.
  if parent and parent.to ~= from then
    self:raise(parent.to, string.format("sent '%s' to '%s' in the name of '%s' while answering a request",
                                        tostring(type_), tostring(to), tostring(from)))
  end
  local sender, receiver = self.parties[from], self.parties[to]
  if sender == nil then error("vt.game: no party named '" .. tostring(from) .. "'", 2) end
  if receiver == nil then self:raise(from, "asked '" .. tostring(to) .. "', who is not in the game") end
  local routes = ROUTES[sender.kind] and ROUTES[sender.kind][receiver.kind]
  if not (routes and routes[type_]) then
    self:raise(from, string.format("sent '%s' to %s '%s': a %s may not ask that", tostring(type_), receiver.kind, to,
                                   sender.kind))
  end
  local question = check_question(type_, body or {}, self.n_leaves)
  if question then self:raise(from, "asked '" .. type_ .. "' of " .. to .. " with an invalid question: " .. question) end
  if self.busy[to] then self:raise(from, "asked '" .. to .. "' while it is answering another request") end
  if parent then
    parent.count = parent.count + 1
    if parent.count > nested_limit(self.n_leaves) then
      self:raise(from, string.format("sent more than %d requests while answering one", nested_limit(self.n_leaves)))
    end
  end
  self.seq = self.seq + 1
  local seq = self.seq
  local request = {kind = "request", game = self.game, seq = seq, from = from, to = to, type = type_, body = body or {}}
  local text = json.encode(request)
  if sender.record then sender:record(self.game, request) end
  local deadline = self.deadlines[type_] or self.deadlines.default
  local mark = #self.raised
  local frame = {nested = 0, count = 0, to = to}
  self.frames[#self.frames + 1] = frame
  self.busy[to] = true
  local t0 = vt.clock()
  local ok, reply_text = pcall(receiver.deliver, receiver, text, deadline, self, seq)
  local total = vt.clock() - t0
  self.busy[to] = nil
  self.frames[#self.frames] = nil
  if parent then parent.nested = parent.nested + total end
  -- The receiver's own time: what the requests it made meanwhile took is theirs.
  local elapsed = total - frame.nested
  if not ok then
    if M.is_forfeit(reply_text) then
      if reply_text.forfeit == to then self:raise(to, reply_text.reason) end
      self:confirm_forfeit(reply_text, mark, to, type_)
    end
    self:raise(to, "failed to answer '" .. type_ .. "': " .. tostring(reply_text))
  end
  -- An answer larger than its asker can be handed (a party in its own process: half its
  -- transport's line, which must carry the answer again as evidence) would fail the honest
  -- asker instead of the party that sent it.
  if sender.max_reply and #reply_text > sender.max_reply then
    self:raise(to, string.format("answered '%s' with %d bytes, more than the %d bytes '%s' can be handed",
                                 type_, #reply_text, sender.max_reply, from))
  end
  local okdecode, reply = pcall(json.decode, reply_text)
  if not okdecode or type(reply) ~= "table" then self:raise(to, "answered '" .. type_ .. "' with a line that is not a JSON object") end
  -- What the network and the asker do with a reply re-encodes it (transcripts, the
  -- attestation's digest): a reply that decodes but does not encode again (`{"$bytes": 5}`)
  -- would fail in the honest asker's hands, and be counted as its forfeit.
  if not pcall(json.encode, reply) then
    self:raise(to, "answered '" .. type_ .. "' with a message that does not encode again as JSON")
  end
  if sender.record then sender:record(self.game, reply) end
  self.log[#self.log + 1] = {seq = seq, from = from, to = to, type = type_, bytes = #text + #reply_text, seconds = elapsed}
  if reply.forfeit then self:confirm_forfeit({forfeit = type(reply.forfeit) == "table" and reply.forfeit.party}, mark, to, type_) end
  if elapsed > deadline and not reply.error then
    self:raise(to, string.format("missed the deadline of '%s' (%.2f s > %.2f s)", type_, elapsed, deadline))
  end
  -- A forfeit of the receiver raised during its exchange (a request it may not send, an
  -- invalid question, ...) stands, even if the receiver caught the error and answered on.
  for i = mark + 1, #self.raised do
    local r = self.raised[i]
    if r.party == to then error(setmetatable({forfeit = r.party, reason = r.reason}, Forfeit), 0) end
  end
  local okreply, answer = pcall(accept_reply, to, type_, reply)
  if not okreply then
    if M.is_forfeit(answer) then self:raise(answer.forfeit, answer.reason) end
    error(answer, 0)
  end
  -- The attestation of what `to` answered `from`: the body's digest, and the question.
  -- (The question as it crossed, decoded from its text: the asker's own table may change.)
  self.replies[seq] = {from = to, to = from, type = type_, digest = M.body_digest(answer),
                       request = (type_ == "logs" or type_ == "leaf" or type_ == "handover") and json.decode(text).body or nil}
  -- The first commitment fixes the run's leaves: the range of every later question (the
  -- client checks it against its spec at once; a second commit changes nothing).
  if type_ == "commit" and self.n_leaves == nil then self.n_leaves = answer.n_leaves end
  return answer, seq
end

return M
