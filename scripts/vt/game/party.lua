-- The common part of every party of vt.game: a name, a store (whose transcripts keep the
-- messages it sent and received), handlers by message type, and a `net` (set when added to
-- a network) through which it sends requests of its own. Also the data set a replaying
-- party builds from a recipe, so a party in another process builds the same data.
local wire = require "vt.game.wire"

local M = {}

local json = vt.json

-- A data set from a recipe table ({kind = "fashion_mnist", limit = 4096}); a data set object
-- is returned as is.
function M.data(recipe)
  if type(recipe) == "userdata" then return recipe end
  if type(recipe) ~= "table" or type(recipe.kind) ~= "string" then
    error("vt.game.data: a recipe is a table {kind = \"fashion_mnist\" | \"text\" | \"synthetic\" | \"tensors\", ...}", 2)
  end
  local options = {}
  for k, v in pairs(recipe) do
    if k ~= "kind" then options[k] = v end
  end
  local make = vt.data[recipe.kind]
  if type(make) ~= "function" then
    error("vt.game.data: unknown data kind '" .. recipe.kind .. "' (valid: fashion_mnist, text, synthetic, tensors)", 2)
  end
  return make(options)
end

-- Why a replaying party given `data` (and `init`, a safetensors path or nil) cannot replay
-- `spec` for want of its inputs, or nil when it holds them: the data set with the spec's
-- digest, and initial weights where the spec starts from imported ones. A party that holds
-- them and still cannot build the spec's runner has found a spec no honest trainer could
-- have run (vt.trainer refuses it too): the trainer's fault, not the party's. The second
-- result says what is missing: "data" or "init".
function M.missing_inputs(spec, data, init)
  if data:digest() ~= spec:get("data.digest") then
    return "its data set '" .. data:name() .. "' has digest " .. data:digest() .. ", the spec's data (" ..
           tostring(spec:get("data.name")) .. ") has " .. tostring(spec:get("data.digest")), "data"
  end
  if spec:get("model.init") ~= nil and init == nil then
    return "the spec starts from imported weights (model.init " .. spec:get("model.init"):sub(1, 12) ..
           "...) and this party was given none (init = their safetensors file)", "init"
  end
  return nil
end

local Party = {}
Party.__index = Party
M.Party = Party

-- A party of `kind` (its metatable's __index leads to Party); errors blame the caller of the
-- party's constructor.
function M.new(kind, name, store, behaviour)
  if store == nil or type(store) ~= "userdata" then error("vt.game." .. kind .. ": option 'store' is required (vt.store.open(path))", 3) end
  local p = setmetatable({kind = kind, name = name or kind, store = store, behaviour = behaviour or {}, handlers = {}}, Party)
  return p
end

-- Appends one message (its JSON text, large bytes summarized) to this party's transcript of `game`.
function Party:record(game, message)
  self.store:append_transcript(game, json.encode(wire.summarize(message)))
end

-- Handles a request message (a decoded table); returns the reply body, or raises.
function Party:dispatch(message)
  local refuse = self.behaviour.refuse
  if refuse and (refuse == true or refuse[message.type]) then
    return {refused = true}
  end
  local delay = self.behaviour.delay
  if delay and delay[message.type] then
    local t0 = vt.clock()
    while vt.clock() - t0 < delay[message.type] do end
  end
  local handler = self.handlers[message.type]
  if handler == nil then error(string.format("%s '%s' does not answer '%s' requests", self.kind, self.name, message.type)) end
  return handler(self, message.body, message)
end

-- Sends a request through the network as this party.
function Party:request(to, type_, body)
  return self.net:request(self.name, to, type_, body)
end

-- A local party receives the request's text, handles it and returns the reply's text.
-- Errors become an error reply; a forfeit raised by a nested request travels in the reply.
function Party:deliver(text)
  local request = json.decode(text)
  self:record(request.game, request)
  local ok, body = pcall(self.dispatch, self, request)
  local reply = {kind = "reply", game = request.game, seq = request.seq, from = self.name, to = request.from, type = request.type}
  if ok then
    reply.body = body
  elseif wire.is_forfeit(body) then
    reply.forfeit = {party = body.forfeit, reason = body.reason}
  else
    reply.error = tostring(body)
  end
  self:record(request.game, reply)
  return json.encode(reply)
end

return M
