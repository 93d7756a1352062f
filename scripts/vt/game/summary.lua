-- vt.game.summary: a verdict and the game's messages in a few lines, for people.
local M = {}

-- A one-paragraph summary of a verdict and the game's messages, for people.
function M.summary(verdict, net)
  local lines = {}
  local function add(fmt, ...) lines[#lines + 1] = string.format(fmt, ...) end
  add("outcome: %s", verdict.outcome)
  add("reason:  %s", verdict.reason or "")
  if verdict.interval and verdict.interval.leaf then
    add("disputed leaf %d: steps %d..%d, found in %d bisection rounds", verdict.interval.leaf,
        verdict.interval.first_step or 0, verdict.interval.last_step or 0, verdict.rounds or 0)
  end
  if verdict.judge_seconds then
    add("judge (%s) replayed %d steps in %.2f s", verdict.judge_profile or "?", verdict.replayed_steps or 0, verdict.judge_seconds)
  end
  if net then
    local bytes, by_type = 0, {}
    for _, m in ipairs(net.log) do
      bytes = bytes + m.bytes
      by_type[m.type] = (by_type[m.type] or 0) + 1
    end
    local parts = {}
    for t, c in pairs(by_type) do parts[#parts + 1] = t .. " x" .. c end
    table.sort(parts)
    add("%d messages (%s), %.1f KB", #net.log, table.concat(parts, ", "), bytes / 1024)
  end
  return table.concat(lines, "\n")
end

return M
