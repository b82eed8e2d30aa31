"""Words that open sentences: a capitalised one of them is no name (model/details.py).

Function words, pronouns and their contractions, greetings, and the verbs, adjectives
and adverbs chat turns most often start with. A name that is one of them (``Will``,
``May``, ``Rose``) is a documented miss of the details check.
"""

_WORDS = """
    a able about above absolutely actually add after afternoon afterwards again agreed
    ah all alright also although am amazing an and another answer any anyone anything
    anyway apologies apparently are aren't as ask asked at awesome bad basically be
    because been before being below besides big book both brilliant bring btw build
    busy but buy by bye call can can't cannot certainly change check cheers clean close
    come congrats cook cool copy correct could couldn't count create dear definitely
    delete deploy did didn't different do does doesn't doing don't done drink drive
    drop each earlier early easy eat edit either else email even evening ever every
    everybody everyone everything exactly excellent false fantastic few finally find
    fine first fix fly folks follow for free from further fw fwd fyi get give glad go
    good goodbye got great guys had hadn't haha happy hard has hasn't have haven't
    having he he's hello her here here's hers herself hey hi him himself his hmm hold
    honestly hopefully how how's however i i'd i'll i'm i've if important in indeed
    install instead interesting into is isn't it it's its itself join just keep know
    last late later least leave less let let's lets like likely listen little load lol
    long look looks lot lovely luckily make many may maybe me meanwhile meet merge
    might mine more morning most move much must my myself need needs neither never new
    next nice night no nobody none nope nor not note noted nothing now obviously of off
    oh ok okay old on once one only open or order other others otherwise our ours
    ourselves out over overall paste pay people perfect perhaps pick please plus
    possibly print probably ps pull push put quick quite rather re read ready really
    remember reminder remove reply ride right run same save second see seems sell send
    set settled several shall share she she's ship short should shouldn't show since
    small so some somebody someone something soon sorry sounds start stay still stop
    such sure take team tell test text than thank thanks that that's the their theirs
    them themselves then there there's these they they're they've thing things think
    third this those though through thus to today together tomorrow tonight too totally
    true try turn unable under understood unfortunately unless until up update upgrade
    upon us use very wait walk want wants was wasn't way we we'll we're we've welcome
    well were weren't what what's whatever when whenever where where's wherever whether
    which while who who's whoever whom whose why will with within without won't would
    wouldn't wow write yeah yep yes yesterday yet you you'd you'll you're you've your
    yours yourself
"""

COMMON_WORDS = frozenset(_WORDS.split())
