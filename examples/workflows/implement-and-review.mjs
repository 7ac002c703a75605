// The example workflow of the JavaScript tool's documentation, unchanged: one agent call to
// implement, one to review it, and a piece of evidence. harn runs it through its Node runner.
export default async ({ agent, evidence }) => {
  const result = await agent("Implement the scoped change", {
    specialist: "implementer",
  });
  const review = await agent(`Review this result:\n${result}`, {
    specialist: "reviewer",
  });
  evidence({
    kind: "review",
    status: "passed",
    label: "Independent review complete",
    acceptanceIds: ["review"],
  });
  return { result, review };
};
